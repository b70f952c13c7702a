import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
/** Node 22, fetched once from the npm registry (the `node` package) and kept in the cache. */
const NODE22_DIR = join(ROOT, "node_modules/.cache/node22");

const npm = (args: string[], cwd: string) =>
  run("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd,
    maxBuffer: 16 << 20,
    timeout: 170_000,
  });

async function node22(): Promise<string> {
  const bin = join(NODE22_DIR, "node_modules/.bin/node");
  if (!existsSync(bin)) {
    mkdirSync(NODE22_DIR, { recursive: true });
    writeFileSync(join(NODE22_DIR, "package.json"), "{}");
    await npm(["install", "node@22"], NODE22_DIR);
  }
  return bin;
}

/** A first user's script: every entry point imports, one call is retried on the fault server. */
const ESM = `
import * as main from "breakwater";
import { startFaultServer } from "breakwater/testing";
for (const sub of ["openai", "anthropic", "google", "ai-sdk", "langchain", "fetch", "storm", "sqlite", "postgres", "redis"])
  await import("breakwater/" + sub);
const server = await startFaultServer({ script: { rules: [{ requests: [1, 1], status: 503 }] } });
const p = main.policy({ maxAttempts: 3, backoff: { baseMs: 10, capMs: 20 } });
const res = await p.execute(() =>
  fetch(server.url + "/v1/chat/completions", { method: "POST", body: "{}" }).then(main.throwIfNotOk),
);
console.log(JSON.stringify({ status: res.status, requests: server.stats().requests }));
await server.close();
`;

const CJS = `
const { policy, classify } = require("breakwater");
const { withBreakwater } = require("breakwater/openai");
console.log(JSON.stringify({ policy: typeof policy, classify: classify({ status: 503 }).kind, adapter: typeof withBreakwater }));
`;

/** The types a consumer compiles against, with both resolutions users pick. */
const TYPES = `
import { type Failure, policy, reasonOf } from "breakwater";
import { callOptions } from "breakwater/openai";
import { VirtualClock } from "breakwater/testing";
const p = policy({ clock: new VirtualClock(), maxAttempts: 2 });
const f: Failure = { kind: "timeout", retryable: true };
export const use = [p, f, reasonOf, callOptions({})];
`;

describe("the packed package, installed in a fresh project", () => {
  let dir: string;
  let node22bin: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "breakwater-consumer-"));
    // npm pack runs the build (prepare), so the tarball holds what the sources say now.
    const packed = await npm(["pack", "--pack-destination", dir], ROOT);
    const tarball = packed.stdout.trim().split("\n").at(-1)!;
    writeFileSync(
      join(dir, "package.json"),
      JSON.stringify({ name: "consumer", private: true, type: "module" }),
    );
    await npm(["install", join(dir, tarball), "--ignore-scripts"], dir);
    writeFileSync(join(dir, "main.mjs"), ESM);
    writeFileSync(join(dir, "main.cjs"), CJS);
    writeFileSync(join(dir, "types.ts"), TYPES);
    node22bin = await node22();
  }, 180_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("holds dist, the README and the LICENSE, and no sources or tests", () => {
    const files = readdirSync(join(dir, "node_modules/breakwater"));
    expect(files.sort()).toEqual(["LICENSE", "README.md", "dist", "package.json"]);
  });

  it.each([
    ["Node 24", () => process.execPath],
    ["Node 22", () => node22bin],
  ])(
    "%s: ESM imports every entry point and retries a call",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await run(bin(), ["main.mjs"], { cwd: dir });
      expect(JSON.parse(r.stdout)).toEqual({ status: 200, requests: 2 });
    },
  );

  it.each([
    ["Node 24", () => process.execPath],
    ["Node 22", () => node22bin],
  ])("%s: CommonJS require() loads it", { timeout: 60_000 }, async (_, bin) => {
    const r = await run(bin(), ["main.cjs"], { cwd: dir });
    expect(JSON.parse(r.stdout)).toEqual({
      policy: "function",
      classify: "overloaded",
      adapter: "function",
    });
  });

  it.each(["nodenext", "bundler"])(
    "the types compile with moduleResolution %s",
    { timeout: 60_000 },
    async (resolution) => {
      const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
      const module = resolution === "bundler" ? "esnext" : "nodenext";
      const r = await run(
        process.execPath,
        [
          tsc,
          "--noEmit",
          "--strict",
          "--skipLibCheck",
          "--module",
          module,
          "--moduleResolution",
          resolution,
          "--target",
          "es2023",
          "types.ts",
        ],
        { cwd: dir },
      ).catch((e: { stdout?: string }) => e);
      expect((r as { stdout?: string }).stdout ?? "").toBe("");
    },
  );
});
