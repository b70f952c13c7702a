// Long tier: the packed package (npm pack, a fresh `npm init -y` project, npm install of the
// tarball and its peers, a Node 22 fetched from npm) on Node 22 and 24, compiled on TypeScript
// 5.9 and 7: a minute of installs and process starts, and what a fresh install proves.
import { execFile, spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FaultScript } from "../../src/testing/fault-server/script.ts";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";
import { namedBlocks } from "../docs/pages.ts";
import { freePort } from "../fixtures/ports.ts";
import { startRedis, type TestRedis } from "../fixtures/redis.ts";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
/** A Node of another major, fetched once from the npm registry (the `node` package) and kept
 * in the cache. */
const nodeDir = (major: number) => join(ROOT, `node_modules/.cache/node${major}`);
/** What the README tells a user to install next to breakwater for its examples. */
const PEERS = [
  "openai",
  "@anthropic-ai/sdk",
  "redis",
  "@opentelemetry/api@~1.9.0",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/context-async-hooks",
];

const npm = (args: string[], cwd: string) =>
  run("npm", [...args, "--no-audit", "--no-fund"], {
    cwd,
    maxBuffer: 16 << 20,
    timeout: 240_000,
  });

async function nodeOf(major: number): Promise<string> {
  const system = "/usr/bin/node"; // the machine's own Node, when it is that major
  const version = await run(system, ["--version"]).then(
    (r) => r.stdout,
    () => "",
  );
  if (version.startsWith(`v${major}.`)) return system;
  const dir = nodeDir(major);
  const bin = join(dir, "node_modules/.bin/node");
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), "{}");
    await npm(["install", `node@${major}`, "--loglevel=error"], dir);
  }
  return bin;
}

/** A first user's script: every entry point imports, one call is retried on the fault server. */
const ESM = `
import * as main from "breakwater";
import { startFaultServer } from "breakwater/testing";
for (const sub of ["openai", "anthropic", "google", "ai-sdk", "langchain", "fetch", "storm", "sqlite", "postgres", "redis", "otel", "temporal/workflow", "gateway"])
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
/** Every public entry point, typed as a consumer uses them. */
const TYPES = `
import { type Failure, policy, reasonOf } from "breakwater";
import { callOptions } from "breakwater/openai";
import { VirtualClock } from "breakwater/testing";
import * as anthropic from "breakwater/anthropic";
import * as google from "breakwater/google";
import * as aiSdk from "breakwater/ai-sdk";
import * as langchain from "breakwater/langchain";
import * as fetchLayer from "breakwater/fetch";
import * as otel from "breakwater/otel";
import * as sqlite from "breakwater/sqlite";
import * as postgres from "breakwater/postgres";
import * as redis from "breakwater/redis";
import * as storm from "breakwater/storm";
import { retryPolicy } from "breakwater/temporal/workflow";
import { gateway } from "breakwater/gateway";
const p = policy({ clock: new VirtualClock(), maxAttempts: 2 });
const f: Failure = { kind: "timeout", retryable: true };
const mw = aiSdk.breakwaterMiddleware({ policy: p });
const fetched: typeof fetch = fetchLayer.guardedFetch({ policy: p });
export const use = [p, f, reasonOf, callOptions({}), mw, fetched, anthropic, google, langchain, otel, sqlite, postgres, redis, storm, retryPolicy().maximumAttempts, gateway];
`;

/** A user on Node 20 (the system Node here) reaching for the SQLite journal. */
const SQLITE_ON_OLD_NODE = `
import { SqliteJournal } from "breakwater/sqlite";
try { new SqliteJournal("old.db"); console.log("opened"); } catch (e) { console.log(e.message); }
`;

describe("the packed package, in a fresh `npm init -y` project, as the README says", () => {
  let dir: string;
  let node22bin: string;
  let node20bin: string;
  let installLog: string;
  let server: FaultServer;
  let redis: TestRedis;
  const blocks = namedBlocks(ROOT);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "breakwater-consumer-"));
    // npm pack builds (prepack), so the tarball holds what the sources say now.
    const packed = await npm(["pack", "--pack-destination", dir, "--loglevel=error"], ROOT);
    const tarball = packed.stdout.trim().split("\n").at(-1)!;
    await npm(["init", "-y"], dir);
    const installed = await npm(["install", join(dir, tarball), ...PEERS], dir);
    installLog = `${installed.stdout}\n${installed.stderr}`;
    writeFileSync(join(dir, "main.mjs"), ESM);
    writeFileSync(join(dir, "main.cjs"), CJS);
    writeFileSync(join(dir, "types.mts"), TYPES);
    writeFileSync(join(dir, "old-node.mjs"), SQLITE_ON_OLD_NODE);
    for (const [file, code] of blocks) writeFileSync(join(dir, file), code);
    for (const example of ["agent.mts", "otel.mts"])
      copyFileSync(join(dir, "node_modules/breakwater/examples", example), join(dir, example));
    node22bin = await nodeOf(22);
    node20bin = await nodeOf(20);
    server = await startFaultServer();
    redis = await startRedis();
  }, 300_000);
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const NODES = [
    ["Node 24", () => process.execPath],
    ["Node 22", () => node22bin],
  ] as const;

  /** Runs a file of the project as the README says (`node file`), the SDKs pointed at
   * the fault server as the quickstart points them. */
  const runFile = (bin: string, file: string, script: FaultScript = {}) => {
    server.setScript(script);
    server.resetStats();
    return run(bin, [file], {
      cwd: dir,
      timeout: 60_000,
      env: {
        PATH: process.env.PATH,
        OPENAI_BASE_URL: `${server.url}/v1`,
        OPENAI_API_KEY: "test",
        ANTHROPIC_BASE_URL: server.url,
        ANTHROPIC_API_KEY: "test",
        REDIS_URL: redis.url,
      },
    });
  };

  it("npm init -y made a CommonJS project; the install warned of no script; the README names its files", () => {
    expect(JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).type).toBe("commonjs");
    expect(installLog).not.toMatch(/prepare|install script|EBADENGINE/i);
    expect([...blocks.keys()].sort()).toEqual(
      [
        "fallback.mts",
        "fleet.mts",
        "limiter.mts",
        "quickstart.mjs",
        "telemetry.mts",
        "run.mts",
        "stream.mts",
      ].sort(),
    );
  });

  it("holds dist, docs, examples, the README and the LICENSE, and no sources or tests", () => {
    const files = readdirSync(join(dir, "node_modules/breakwater"));
    expect(files.sort()).toEqual([
      "LICENSE",
      "README.md",
      "dist",
      "docs",
      "examples",
      "package.json",
    ]);
    // What the README links to is in the package.
    const readme = readFileSync(join(dir, "node_modules/breakwater/README.md"), "utf8");
    for (const [, link] of readme.matchAll(/\]\(((?:docs|examples)\/[^)#]+)/g))
      expect(existsSync(join(dir, "node_modules/breakwater", link!)), link).toBe(true);
  });

  it.each(NODES)(
    "%s: ESM imports every entry point and retries a call",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await run(bin(), ["main.mjs"], { cwd: dir });
      expect(JSON.parse(r.stdout)).toEqual({ status: 200, requests: 2 });
    },
  );

  it.each(NODES)("%s: CommonJS require() loads it", { timeout: 60_000 }, async (_, bin) => {
    const r = await run(bin(), ["main.cjs"], { cwd: dir });
    expect(JSON.parse(r.stdout)).toEqual({
      policy: "function",
      classify: "overloaded",
      adapter: "function",
    });
  });

  it.each([
    ["TypeScript 5", "typescript", "nodenext"],
    ["TypeScript 5", "typescript", "bundler"],
    ["TypeScript 7", "typescript-v7", "nodenext"],
    ["TypeScript 7", "typescript-v7", "bundler"],
  ])(
    "%s (%s): every entry point's types compile with moduleResolution %s",
    { timeout: 60_000 },
    async (_, pkg, resolution) => {
      const tsc = join(ROOT, "node_modules", pkg, "bin/tsc");
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
          "types.mts",
        ],
        { cwd: dir },
      ).catch((e: { stdout?: string }) => e);
      expect((r as { stdout?: string }).stdout ?? "").toBe("");
    },
  );

  it.each(NODES)(
    "%s: the quickstart against `--fail-first 2`: two retries, then the answer",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await runFile(bin(), "quickstart.mjs", {
        rules: [{ requests: [1, 2], status: 503 }],
      });
      expect(r.stdout).toMatch(
        /^attempt 1: overloaded, retrying in \d+ ms\nattempt 2: overloaded, retrying in \d+ ms\nThe fault server says hello, one word at a time\.\n$/,
      );
      expect(r.stderr).toBe("");
    },
  );

  it.each(NODES)(
    "%s: the quickstart's command line as the README has it: the server listens, then runs it",
    { timeout: 60_000 },
    async (_, bin) => {
      const readme = readFileSync(join(ROOT, "README.md"), "utf8");
      const line = /^```sh\n(npx breakwater fault-server [^\n]*)\n```/m.exec(readme)?.[1];
      expect(line).toMatch(/-- node quickstart\.mjs$/);
      // Port 0: any free one (8787 may be taken on a machine running the suite twice).
      const command = line!.replace("fault-server", "fault-server --port 0");
      const r = await run("sh", ["-c", command], {
        cwd: dir,
        timeout: 60_000,
        env: { PATH: `${dirname(bin())}:${process.env.PATH}`, HOME: process.env.HOME },
      });
      expect(r.stdout).toMatch(
        /^attempt 1: overloaded, retrying in \d+ ms\nattempt 2: overloaded, retrying in \d+ ms\nThe fault server says hello, one word at a time\.\n$/,
      );
    },
  );

  it.each(NODES)(
    "%s: the gateway's quickstart as docs/gateway.md has it: fault server, gateway, curl, one line",
    { timeout: 60_000 },
    async (_, bin) => {
      const page = readFileSync(join(ROOT, "docs/gateway.md"), "utf8");
      const config = /## Quickstart[\s\S]*?^```jsonc\n([\s\S]*?)^```/m.exec(page)?.[1];
      const line = /^```sh\n(npx breakwater fault-server [^\n]*)\n```/m.exec(page)?.[1];
      expect(line).toMatch(/-- curl -s http:\/\/127\.0\.0\.1:8790\//);
      writeFileSync(join(dir, "gateway.json"), config!);
      // Free ports: 8787 and 8790 may be taken on a machine running the suite twice.
      const port = await freePort();
      const command = line!
        .replace("fault-server", "fault-server --port 0")
        .replace("--config gateway.json", `--config gateway.json --port ${port}`)
        .replace("127.0.0.1:8790", `127.0.0.1:${port}`);
      const r = await run("sh", ["-c", command], {
        cwd: dir,
        timeout: 60_000,
        env: { PATH: `${dirname(bin())}:${process.env.PATH}`, HOME: process.env.HOME },
      });
      const answer = JSON.parse(r.stdout) as { choices: { message: { content: string } }[] };
      expect(answer.choices[0]?.message.content).toBe(
        "The fault server says hello, one word at a time.",
      );
    },
  );

  it.each(NODES)(
    "%s: `npx breakwater storm` runs its scenarios in threads from the package, as in one",
    { timeout: 60_000 },
    async (_, bin) => {
      const env = { PATH: `${dirname(bin())}:${process.env.PATH}`, HOME: process.env.HOME };
      const storm = async (threads: string) => {
        const file = `storm-${threads}.json`;
        await run(
          "sh",
          [
            "-c",
            `npx breakwater storm --scenario blip,tool-deploy --stacks naive,breakwater --threads ${threads} --json ${file}`,
          ],
          { cwd: dir, timeout: 60_000, env },
        );
        return readFileSync(join(dir, file), "utf8");
      };
      const two = await storm("2");
      expect(JSON.parse(two).scenarios).toHaveLength(2);
      expect(two).toBe(await storm("1"));
    },
  );

  it.each(NODES)(
    "%s: a stream answered at once reports its usage in its ledger",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await runFile(bin(), "stream.mts");
      expect(r.stdout).toContain("The fault server says hello");
      const input = Number(/inputTokens: (\d+)/.exec(r.stdout)?.[1]);
      const output = Number(/outputTokens: (\d+)/.exec(r.stdout)?.[1]);
      expect(input).toBeGreaterThan(0);
      expect(output).toBeGreaterThan(0);
    },
  );

  it.each(NODES)(
    "%s: the Runs example runs twice in a row, and resumes at the failed step after kill -9",
    { timeout: 120_000 },
    async (_, bin) => {
      rmSync(join(dir, "runs.db"), { force: true });
      const first = await runFile(bin(), "run.mts");
      expect(first.stdout).toMatch(/stepsReplayed: 0/);
      const second = await runFile(bin(), "run.mts"); // at once: the first let go of its lease
      expect(second.stdout).toMatch(/stepsReplayed: 3/);
      expect(server.stats().requests).toBe(0); // nothing paid twice

      rmSync(join(dir, "runs.db"), { force: true });
      // The second model call ("answer") hangs; the process dies there.
      server.setScript({ rules: [{ route: "openai", requests: [2, 2], headersDelayMs: 30_000 }] });
      server.resetStats();
      const child = spawn(bin(), ["run.mts"], {
        cwd: dir,
        env: {
          PATH: process.env.PATH,
          OPENAI_BASE_URL: `${server.url}/v1`,
          OPENAI_API_KEY: "test",
        },
        stdio: "ignore",
      });
      const exited = new Promise((r) => child.once("exit", r));
      for (let i = 0; i < 300 && server.stats().requests < 2; i++)
        await new Promise((r) => setTimeout(r, 50));
      expect(server.stats().requests).toBe(2);
      child.kill("SIGKILL");
      await exited;
      const resumed = await runFile(bin(), "run.mts");
      expect(resumed.stdout).toMatch(/stepsReplayed: 2/); // plan and search from the journal
      expect(server.stats().requests).toBe(1); // only "answer" is sent again
    },
  );

  it.each(NODES)(
    "%s: the fallback answers from Anthropic when OpenAI cannot",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await runFile(bin(), "fallback.mts", {
        rules: [{ route: "openai", status: 503 }],
      });
      expect(r.stdout).toContain("The fault server says hello");
      const s = server.stats();
      expect(s.byRoute.openai?.requests).toBe(1); // an overload moves on at once: Anthropic has room
      expect(s.byRoute.anthropic?.byOutcome).toEqual({ 200: 1 });
    },
  );

  it.each(NODES)(
    "%s: the limiter example makes its five calls under the server's limits, none refused",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await runFile(bin(), "limiter.mts", {
        rateLimit: { requestsPerMinute: 600, tokensPerMinute: 100_000 },
      });
      expect(r.stdout).toMatch(/ 5\n/);
      expect(r.stdout).toMatch(/requests: \{ level: [\d.]+, capacity: \d+/);
      expect(server.stats().byRoute.openai?.byOutcome).toEqual({ 200: 5 });
    },
  );

  it.each(NODES)(
    "%s: the OpenTelemetry example prints the call's span and its attempt's",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await runFile(bin(), "telemetry.mts");
      expect(r.stdout).toMatch(/name: 'chat gpt-4o-mini'/);
      expect(r.stdout).toMatch(/name: 'breakwater.attempt 1'/);
    },
  );

  it.each(NODES)(
    "%s: the fleet example connects to Redis and syncs",
    { timeout: 60_000 },
    async (_, bin) => {
      const r = await runFile(bin(), "fleet.mts");
      expect(r.stdout).toMatch(/failures: 0/);
      expect(r.stdout).toMatch(/healthy: true/);
    },
  );

  it.each(NODES)(
    "%s: the shipped examples run as copied into the project",
    { timeout: 60_000 },
    async (_, bin) => {
      const agent = await runFile(bin(), "agent.mts");
      expect(agent.stdout).toMatch(/double charges 0/);
      const otel = await runFile(bin(), "otel.mts");
      expect(otel.stdout).toMatch(/breakwater\.attempt 3 .*breakwater\.outcome=ok/);
    },
  );

  it("Node 20: breakwater/sqlite says which Node it needs", { timeout: 30_000 }, async () => {
    const r = await run(node20bin, ["old-node.mjs"], { cwd: dir });
    expect(r.stdout).toMatch(/breakwater\/sqlite needs node:sqlite, built into Node >= 22\.13/);
  });
});
