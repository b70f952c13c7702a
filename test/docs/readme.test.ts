import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadStacks } from "../../src/storm/config.ts";
import { breakwater } from "../../src/storm/stacks.ts";
import { runStorm } from "../../src/storm/storm.ts";
import { parseScript } from "../../src/testing/fault-server/script.ts";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";
import { startPostgres, type TestPostgres } from "../fixtures/postgres.ts";
import { startRedis, type TestRedis } from "../fixtures/redis.ts";
import { startRestate, type TestRestate } from "../fixtures/restate.ts";
import { guidePages } from "./pages.ts";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
/** Inside the package (not under node_modules, where Node strips no types), so `import
 * "breakwater/..."` resolves to it (self-reference), to its
 * sources through the `breakwater-source` export condition. */
const DIR = join(ROOT, ".doctest");

interface Block {
  readonly name: string;
  readonly code: string;
  readonly file: string;
}

/** Every TypeScript block of the README and the guide's pages, in order, with the line it
 * starts on; then the example on each entry point's module comment (the API reference's),
 * named by its file. */
function blocks(): Block[] {
  const out: Block[] = [];
  for (const [page, text] of PAGES)
    for (const m of text.matchAll(/^```ts\n([\s\S]*?)^```/gm)) {
      const line = text.slice(0, m.index).split("\n").length;
      const file = join(DIR, `${page.replace(/\W/g, "-")}-${line}.ts`);
      out.push({ name: `${page}:${line}`, code: m[1]!, file });
    }
  const entries: string[] = JSON.parse(
    readFileSync(join(ROOT, "typedoc.json"), "utf8"),
  ).entryPoints;
  for (const entry of entries) {
    const header = /^\/\*\*([\s\S]*?)\*\//.exec(readFileSync(join(ROOT, entry), "utf8"))?.[1] ?? "";
    const lines = header.split("\n").map((l) => l.replace(/^ \* ?/, ""));
    const example = /^```ts\n([\s\S]*?)^```/m.exec(lines.join("\n"));
    const name = `${entry} @example`;
    out.push({
      name,
      code: example?.[1] ?? "",
      file: join(DIR, `${entry.replace(/\W/g, "-")}.ts`),
    });
  }
  return out;
}

const PAGES = guidePages(ROOT);
const BLOCKS = blocks();
/** The text of every page, for what may live on any of them. */
const ALL = [...PAGES.values()].join("\n");

/** Type errors of all the blocks, as one program (module resolution as a consumer's). */
function typeErrors(): Map<string, string[]> {
  const program = ts.createProgram(
    BLOCKS.map((b) => b.file),
    {
      target: ts.ScriptTarget.ES2023,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      customConditions: ["breakwater-source"],
      allowImportingTsExtensions: true,
      noEmit: true,
      strict: true,
      skipLibCheck: true,
      types: ["node"],
    },
  );
  const out = new Map<string, string[]>();
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const file = d.file?.fileName ?? "";
    const at =
      d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
    const list = out.get(file) ?? [];
    list.push(`line ${at}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
    out.set(file, list);
  }
  return out;
}

describe("every TypeScript block in the README and the guide compiles and runs", () => {
  let server: FaultServer;
  let redis: TestRedis;
  // The durable engines' pages run live: a Restate server and a Postgres for DBOS.
  let restate: TestRestate;
  let pg: TestPostgres;
  let errors: Map<string, string[]>;
  // Type-checking every block is CPU-bound: seconds alone, several times that on a machine
  // busy with the rest of the suite.
  beforeAll(async () => {
    rmSync(DIR, { recursive: true, force: true });
    mkdirSync(DIR, { recursive: true });
    for (const b of BLOCKS) writeFileSync(b.file, `${b.code}\nexport {};\n`);
    errors = typeErrors();
    [server, redis, restate, pg] = await Promise.all([
      startFaultServer(),
      startRedis(),
      startRestate(),
      startPostgres(),
    ]);
  }, 180_000);
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
    await restate?.stop();
    await pg?.stop();
  });

  it("every fault script in the README and the guide is one the fault server takes", () => {
    const scripts = [...ALL.matchAll(/^```json\n([\s\S]*?)^```/gm)].map((m) => JSON.parse(m[1]!));
    expect(scripts.length).toBeGreaterThanOrEqual(1);
    for (const script of scripts) expect(() => parseScript(script)).not.toThrow();
  });

  it("the guide's own storm stack is the storm's breakwater row, number for number", {
    timeout: 60_000,
  }, async () => {
    const code = /^```js\n\/\/ stacks\.mjs\n([\s\S]*?)^```/m.exec(ALL)?.[1];
    expect(code, "the stacks.mjs block").toBeDefined();
    const file = join(DIR, "stacks.mjs");
    writeFileSync(file, code!);
    const [mine] = await loadStacks(file);
    const report = await runStorm({
      scenarios: ["blip", "rate-limit"],
      stacks: [breakwater, mine!],
    });
    for (const s of report.scenarios) {
      const [row, readme] = s.results;
      expect({ ...readme!, stack: row!.stack }).toEqual(row);
    }
  });

  it("there are blocks to check", () => {
    expect(BLOCKS.length).toBeGreaterThanOrEqual(15);
  });

  it.each(BLOCKS.map((b) => [b.name, b] as const))(
    "%s",
    { timeout: 30_000 },
    async (_name, block) => {
      expect(block.code, "an example").toMatch(/import .* from "breakwater/);
      expect(errors.get(block.file) ?? [], "type errors").toEqual([]);
      server.setScript({});
      // The SDKs read their endpoints from the environment: here, the fault server.
      const env = {
        ...process.env,
        OPENAI_BASE_URL: `${server.url}/v1`,
        OPENAI_API_KEY: "sk-doc-test",
        ANTHROPIC_BASE_URL: server.url,
        ANTHROPIC_API_KEY: "sk-ant-doc-test",
        GOOGLE_GEMINI_BASE_URL: server.url,
        GEMINI_API_KEY: "doc-test",
        PAYMENTS_URL: `${server.url}/tools`,
        REDIS_URL: redis.url,
        RESTATE_ADMIN_URL: restate.admin,
        RESTATE_INGRESS_URL: restate.ingress,
        RESTATE_LOGGING: "ERROR",
        DBOS_SYSTEM_DATABASE_URL: pg.url,
        NODE_NO_WARNINGS: "1",
      };
      const r = await run(process.execPath, ["--conditions=breakwater-source", block.file], {
        cwd: DIR,
        env,
        timeout: 25_000,
      }).catch((e: { code?: number; stdout?: string; stderr?: string }) => e);
      expect(r.stderr ?? "", "stderr").toBe("");
      expect((r as { code?: number }).code, "exit code").toBeUndefined();
    },
  );
});
