import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";

// `breakwater gateway --config file.json`: listens, answers, reloads on SIGHUP without
// dropping the call in flight, keeps its config when the new one is bad, stops on SIGTERM.
let fault: FaultServer;
const dir = mkdtempSync(join(tmpdir(), "bw-gateway-cli-"));
const file = join(dir, "gateway.json");

beforeAll(async () => {
  fault = await startFaultServer();
});
afterAll(async () => {
  await fault?.close();
  rmSync(dir, { recursive: true, force: true });
});

const config = (models: Record<string, string>) => ({
  keys: ["env:BW_GW_KEY"],
  upstreams: { up: { wire: "openai", baseUrl: `${fault.url}/v1`, apiKey: "env:BW_UP_KEY" } },
  models,
});

const chat = (url: string, model: string) =>
  fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: "Bearer gw-key", "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });

describe("breakwater gateway", () => {
  it("serves, reloads on SIGHUP without dropping a call, keeps a bad config out, stops on SIGTERM", async () => {
    writeFileSync(file, JSON.stringify(config({ first: "up" })));
    const child = spawn(
      process.execPath,
      ["src/cli/main.ts", "gateway", "--config", file, "--port", "0"],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, BW_GW_KEY: "gw-key", BW_UP_KEY: "up-key" },
      },
    );
    let out = "";
    const said = (re: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        const look = () => {
          const m = re.exec(out);
          if (m) resolve(m);
        };
        child.stdout.on("data", (d) => {
          out += d;
          look();
        });
        child.once("exit", (code) => reject(new Error(`exited with ${code}: ${out}`)));
        look();
      });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    try {
      const url = (await said(/gateway listening on (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
      expect((await chat(url, "first")).status).toBe(200);
      expect((await chat(url, "second")).status).toBe(404);
      // A slow answer in flight while the config changes under it.
      fault.setScript({ rules: [{ headersDelayMs: 600 }] });
      const inFlight = chat(url, "first");
      await new Promise((r) => setTimeout(r, 100));
      writeFileSync(file, JSON.stringify(config({ first: "up", second: "up" })));
      child.kill("SIGHUP");
      await said(/gateway: reloaded/);
      expect((await inFlight).status).toBe(200);
      fault.setScript({});
      expect((await chat(url, "second")).status).toBe(200);
      writeFileSync(file, JSON.stringify({ ...config({}), upstreams: {} }));
      child.kill("SIGHUP");
      await said(/kept the config in force; .*upstreams/);
      expect((await chat(url, "second")).status).toBe(200);
    } finally {
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  }, 30_000);

  it("names the file and the option when the config is wrong", async () => {
    writeFileSync(file, JSON.stringify({ ...config({ m: "nowhere" }) }));
    const child = spawn(process.execPath, ["src/cli/main.ts", "gateway", "--config", file], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, BW_GW_KEY: "k", BW_UP_KEY: "u" },
    });
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(2);
    expect(err).toContain(file);
    expect(err).toContain('"models.m.upstream"');
  });
});
