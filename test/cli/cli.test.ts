import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const cli = (...args: string[]) => run(process.execPath, ["src/cli/main.ts", ...args]);

describe("the breakwater command", () => {
  it("fault-server: listens on loopback, serves its stats, stops on SIGTERM", async () => {
    const child = spawn(process.execPath, ["src/cli/main.ts", "fault-server", "--port", "0"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout.on("data", (d) => {
          out += d;
          const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once("exit", (code) => reject(new Error(`exited early with ${code}`)));
      });
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: "m", messages: [] }),
      });
      expect(res.status).toBe(200);
      const stats = await (await fetch(`${url}/__stats`)).json();
      expect(stats.requests).toBe(1);
    } finally {
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  });

  it("storm: one scenario, chosen stacks, a table; bad options are named", async () => {
    const r = await cli(
      "storm",
      "--scenario",
      "blip",
      "--stacks",
      "naive,breakwater",
      "--seed",
      "3",
    );
    expect(r.stdout).toMatch(/^blip: /m);
    expect(r.stdout).toMatch(/^\s+naive\s+\d+/m);
    expect(r.stdout).toMatch(/^\s+breakwater\s+\d+/m);
    expect(r.stdout).not.toMatch(/openai-sdk/);
    const bad = await cli("storm", "--stacks", "nope").catch((e) => e);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--stacks: unknown stack "nope"; one of naive, openai-sdk/);
  });

  it("an unknown command prints the usage and fails", async () => {
    const r = await cli("frobnicate").catch((e) => e);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown command "frobnicate"/);
    expect(r.stderr).toMatch(/storm\s+simulate an outage/);
  });
});
