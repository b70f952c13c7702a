import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultServer, startFaultServer } from "../../src/testing/index.ts";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
const SRC = join(ROOT, "src");
// Inside the project, so the scripts resolve its dependencies (openai) as a user's would.
const CACHE = join(ROOT, "node_modules", ".cache");
mkdirSync(CACHE, { recursive: true });
const dir = mkdtempSync(join(CACHE, "liveness-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `code` as a plain ES module script in a fresh Node process, as a user would. */
async function script(name: string, code: string) {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, code.replaceAll("@src", SRC));
  try {
    const { stdout } = await run(process.execPath, [file], { timeout: 15_000 });
    return { code: 0, stdout };
  } catch (e) {
    const err = e as { code?: number; stdout?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? "" };
  }
}

const FLAKY = `
let n = 0;
const op = async () => {
  if (n++ === 0) throw Object.assign(new Error("503"), { status: 503 });
  return "ok";
};`;

describe("a pending retry keeps the process alive (docs/architecture.md, rule 12)", () => {
  it("a top-level await meets one 503, waits out the backoff and finishes", async () => {
    const r = await script(
      "tla",
      `import { policy } from "@src/index.ts";${FLAKY}
const p = policy({ backoff: { baseMs: 300, capMs: 300, jitter: "none" } });
console.log(await p.execute(op), n);`,
    );
    expect(r).toEqual({ code: 0, stdout: "ok 2\n" });
  });

  it("main().then(...) finishes too", async () => {
    const r = await script(
      "then",
      `import { policy } from "@src/index.ts";${FLAKY}
const p = policy({ backoff: { baseMs: 300, capMs: 300, jitter: "none" }, attemptTimeoutMs: 5_000 });
async function main() { return p.execute(op); }
main().then((v) => console.log(v, n));`,
    );
    expect(r).toEqual({ code: 0, stdout: "ok 2\n" });
  });

  it("backgroundClock is the explicit opt-out: the process may exit mid-backoff", async () => {
    const r = await script(
      "background",
      `import { backgroundClock, policy } from "@src/index.ts";${FLAKY}
const p = policy({ clock: backgroundClock, backoff: { baseMs: 300, capMs: 300, jitter: "none" } });
console.log(await p.execute(op), n);`,
    );
    expect(r.code).toBe(13); // Node: "unsettled top-level await"
    expect(r.stdout).toBe("");
  });

  describe("through withBreakwater(new OpenAI()) against the fault server", () => {
    let server: FaultServer;
    beforeAll(async () => {
      server = await startFaultServer();
    });
    afterAll(() => server.close());

    it("one request, a 503, then the retry and the answer", async () => {
      server.setScript({ rules: [{ route: "openai", requests: [1, 1], status: 503 }] });
      const r = await script(
        "openai",
        `import OpenAI from "openai";
import { withBreakwater } from "@src/providers/openai.ts";
const client = withBreakwater(new OpenAI({ baseURL: "${server.url}/v1", apiKey: "test" }), {
  policy: { backoff: { baseMs: 300, capMs: 300, jitter: "none" } },
});
const r = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });
console.log(r.choices[0].finish_reason);`,
      );
      expect(r).toEqual({ code: 0, stdout: "stop\n" });
      expect(server.stats().requests).toBe(2);
    });
  });
});
