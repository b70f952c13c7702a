import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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

/** `breakwater gateway --config file --port 0` in a process of its own; `said` waits for a
 * line of its output. */
function cli(file: string) {
  const child = spawn(
    process.execPath,
    ["src/cli/main.ts", "gateway", "--config", file, "--port", "0"],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, BW_GW_KEY: "gw-key", BW_UP_KEY: "up-key" },
    },
  );
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => {
    err += d;
  });
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
      child.once("exit", (code) => reject(new Error(`exited with ${code}: ${out}${err}`)));
      look();
    });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { child, said, exited, stderr: () => err };
}

const LISTENING = /gateway listening on (http:\/\/127\.0\.0\.1:\d+)/;

describe("breakwater gateway", () => {
  it("serves, reloads on SIGHUP without dropping a call, keeps a bad config out, stops on SIGTERM", async () => {
    writeFileSync(file, JSON.stringify(config({ first: "up" })));
    const { child, said, exited } = cli(file);
    try {
      const url = (await said(LISTENING))[1]!;
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
    const { exited, stderr } = cli(file);
    expect(await exited).toBe(2);
    expect(stderr()).toContain(file);
    expect(stderr()).toContain('"models.m.upstream"');
  });

  it("reads a YAML config (a name ending in .yaml): anchors shared, a key given twice refused with its line", async () => {
    const yaml = join(dir, "gateway.yaml");
    writeFileSync(
      yaml,
      [
        "# one policy for both upstreams",
        "keys: [env:BW_GW_KEY]",
        "upstreams:",
        "  up:",
        "    wire: openai",
        `    baseUrl: ${fault.url}/v1`,
        "    apiKey: env:BW_UP_KEY",
        "    policy: &fast { maxAttempts: 2, backoff: { baseMs: 10, capMs: 20 } }",
        "  again:",
        "    wire: openai",
        `    baseUrl: ${fault.url}/v1`,
        "    apiKey: env:BW_UP_KEY",
        "    policy: *fast",
        "models:",
        '  "*": [up, again]',
        "",
      ].join("\n"),
    );
    fault.setScript({ rules: [{ status: 500 }] });
    const { child, said, exited } = cli(yaml);
    try {
      const url = (await said(LISTENING))[1]!;
      fault.resetStats();
      const r = await chat(url, "any");
      expect(r.status).toBe(500); // the provider's own answer, after both upstreams' 2 attempts
      expect(fault.stats().requests).toBe(4);
    } finally {
      fault.setScript({});
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
    writeFileSync(yaml, "keys: [a]\nkeys: [b]\n");
    const twice = cli(yaml);
    expect(await twice.exited).toBe(2);
    expect(twice.stderr()).toContain(yaml);
    expect(twice.stderr()).toMatch(/not YAML .*unique.*line 2/is);
  }, 30_000);

  it("the YAML config in docs/gateway.md holds the same settings as its JSON quickstart", async () => {
    const { parse } = await import("yaml");
    const doc = readFileSync("docs/gateway.md", "utf8");
    const block = (lang: string) => new RegExp(`\`\`\`${lang}\n([\\s\\S]*?)\`\`\``).exec(doc)![1]!;
    expect(parse(block("yaml"))).toEqual(JSON.parse(block("jsonc")));
  });
});
