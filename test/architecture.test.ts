import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { OWN_PROCESS, PROCESS_WIDE } from "./own-process.ts";

const ROOT = resolve(import.meta.dirname, "..");
const SRC = join(ROOT, "src");

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? files(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : [],
  );
}

const SOURCES = files(SRC).map((f) => ({ path: relative(SRC, f), text: readFileSync(f, "utf8") }));

/** Relative imports of a file, as paths under src/. */
function importsOf(path: string, text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:from|import)\s*\(?\s*"(\.[^"]+)"/g))
    out.push(relative(SRC, resolve(SRC, dirname(path), m[1]!)));
  return out;
}

const folder = (path: string) => (path.includes("/") ? path.slice(0, path.indexOf("/")) : path);
const ENTRIES = new Set([
  "index.ts",
  "internal.ts",
  "testing/index.ts",
  "storm/index.ts",
  "gateway/gateway.ts",
]);
/** The public entry, and the internal one the library's own integrations share. */
const LIBRARY = (t: string) => t === "index.ts" || t === "internal.ts";

/** What each folder may import, beside itself (docs/architecture.md, "Modules"). */
const ALLOWED: Record<string, (target: string) => boolean> = {
  core: () => false,
  http: () => false,
  audit: (t) => folder(t) === "core",
  run: (t) => folder(t) === "core",
  policy: (t) => ["core", "run"].includes(folder(t)),
  tools: (t) => ["core", "run", "policy"].includes(folder(t)),
  providers: LIBRARY,
  // The engines' step wrappers: the entries, the AI SDK middleware a Restate handler wraps,
  // and core alone where workflow code must import nothing else (temporal-retry.ts).
  engines: (t) => LIBRARY(t) || ["core", "providers"].includes(folder(t)),
  // The gateway: the entries, the fetch layer it sends through, a fleet's shared state, the
  // OpenTelemetry observer.
  gateway: (t) => LIBRARY(t) || ["providers", "redis", "otel"].includes(folder(t)),
  otel: LIBRARY,
  redis: LIBRARY,
  testing: (t) => ENTRIES.has(t),
  storm: (t) => ENTRIES.has(t),
  cli: (t) => ENTRIES.has(t),
};

/** Whether an import or export brings in no value (type-only), so it cannot make a loop
 * that runs. */
function valueFree(st: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(st)) {
    if (st.isTypeOnly) return true;
    const e = st.exportClause;
    return e !== undefined && ts.isNamedExports(e) && e.elements.every((x) => x.isTypeOnly);
  }
  const c = st.importClause;
  if (c === undefined) return false; // a side-effect import runs the module
  if (c.isTypeOnly) return true;
  if (c.name !== undefined) return false;
  const b = c.namedBindings;
  return b !== undefined && ts.isNamedImports(b) && b.elements.every((x) => x.isTypeOnly);
}

/** The loops of a graph of modules, each as its members joined by " -> ". */
function cycles(graph: Map<string, string[]>): string[] {
  const found: string[] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (n: string) => {
    state.set(n, "open");
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      if (!graph.has(m)) continue;
      if (state.get(m) === "open") found.push([...stack.slice(stack.indexOf(m)), m].join(" -> "));
      else if (state.get(m) === undefined) visit(m);
    }
    stack.pop();
    state.set(n, "done");
  };
  for (const n of graph.keys()) if (state.get(n) === undefined) visit(n);
  return found;
}

describe("architecture (docs/architecture.md)", () => {
  it("every import points down the layers; storm, testing and cli use public entry points", () => {
    const bad: string[] = [];
    for (const { path, text } of SOURCES) {
      const own = folder(path);
      if (path === "index.ts" || path === "internal.ts") continue; // the entries re-export the layers
      for (const target of importsOf(path, text)) {
        if (folder(target) === own && own !== "index.ts") continue;
        const allowed = ALLOWED[own];
        if (allowed === undefined) bad.push(`${path}: folder "${own}" has no import rule`);
        else if (!allowed(target)) bad.push(`${path} imports ${target}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it("no function runs past 60 lines, nor past 40 in core/ and policy/", () => {
    const long: string[] = [];
    for (const { path, text } of SOURCES) {
      const max = ["core", "policy"].includes(folder(path)) ? 40 : 60;
      const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
      const visit = (n: ts.Node) => {
        if (ts.isFunctionLike(n) && "body" in n && n.body) {
          const from = sf.getLineAndCharacterOfPosition(n.getStart()).line;
          const to = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
          if (to - from + 1 > max) long.push(`${path}:${from + 1} (${to - from + 1} lines)`);
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    expect(long).toEqual([]);
  });

  it("no class in policy/ holds more than 25 fields (per-attempt state lives on a per-attempt object)", () => {
    const big: string[] = [];
    for (const { path, text } of SOURCES) {
      if (folder(path) !== "policy") continue;
      const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
      const visit = (n: ts.Node) => {
        if (ts.isClassLike(n)) {
          const fields = n.members.filter(ts.isPropertyDeclaration).length;
          if (fields > 25)
            big.push(`${path}: ${n.name?.text ?? "(anonymous)"} has ${fields} fields`);
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    expect(big).toEqual([]);
  });

  it("no value import runs in a loop (type-only imports may)", () => {
    const graph = new Map<string, string[]>();
    for (const { path, text } of SOURCES) {
      const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
      const deps: string[] = [];
      for (const st of sf.statements) {
        if (!ts.isImportDeclaration(st) && !ts.isExportDeclaration(st)) continue;
        const spec = st.moduleSpecifier;
        if (spec === undefined || !ts.isStringLiteral(spec) || !spec.text.startsWith(".")) continue;
        if (valueFree(st)) continue;
        deps.push(relative(SRC, resolve(SRC, dirname(path), spec.text)));
      }
      graph.set(path, deps);
    }
    expect(cycles(graph)).toEqual([]);
  });

  it("no gate is called and no deadline computed outside core/ and policy/ (rules 1 and 6)", () => {
    const GATE =
      /\.(?:budget|breaker|limiter)\??\.(?:tryAcquire|acquire|onSuccess|onFailure|onNeutral|refund|hold)\(/;
    const DEADLINE = /now\(\)\s*\+[^;\n]*deadlineMs/;
    const bad: string[] = [];
    for (const { path, text } of SOURCES) {
      if (["core", "policy"].includes(folder(path))) continue;
      text.split("\n").forEach((line, i) => {
        if (GATE.test(line)) bad.push(`${path}:${i + 1} calls a policy's gate: ${line.trim()}`);
        if (DEADLINE.test(line)) bad.push(`${path}:${i + 1} computes a deadline: ${line.trim()}`);
      });
    }
    expect(bad).toEqual([]);
  });

  it("a test file that sets process-wide state runs in a process of its own; no helper sets any", () => {
    const TEST = join(ROOT, "test");
    const bad: string[] = [];
    for (const file of files(TEST)) {
      const path = relative(ROOT, file);
      // Worker scripts and services the tests spawn are processes of their own.
      if (path === "test/own-process.ts" || /\/fixtures\/.*(?:worker|service)/.test(path)) continue;
      if (!PROCESS_WIDE.test(readFileSync(file, "utf8"))) continue;
      if (!path.endsWith(".test.ts")) bad.push(`${path}: a helper sets process-wide state`);
      else if (!OWN_PROCESS.includes(path)) bad.push(`${path}: add it to OWN_PROCESS`);
    }
    expect(bad).toEqual([]);
    for (const path of OWN_PROCESS)
      expect(PROCESS_WIDE.test(readFileSync(join(ROOT, path), "utf8")), path).toBe(true);
  });

  it("a long-tier test file says in its header why it is long, and none runs in a process of its own", () => {
    const long = files(join(ROOT, "test"))
      .map((f) => relative(ROOT, f))
      .filter((p) => p.endsWith(".long.test.ts"));
    expect(long.length).toBeGreaterThanOrEqual(10);
    const bad = long.filter((p) => {
      const header = readFileSync(join(ROOT, p), "utf8").split("\n\n").slice(0, 3).join("\n");
      return !/^\/\/ Long tier: .*\S/m.test(header);
    });
    expect(bad).toEqual([]);
    expect(OWN_PROCESS.filter((p) => p.endsWith(".long.test.ts"))).toEqual([]);
  });

  it("comments cite the repository's own rules, and only rules that exist", () => {
    const doc = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
    const rules = new Set([...doc.matchAll(/^(\d+)\. \*\*/gm)].map((m) => Number(m[1])));
    expect(rules.size).toBeGreaterThanOrEqual(12);
    const bad: string[] = [];
    for (const { path, text } of SOURCES) {
      if (/DESIGN(\.md| rule)|seeds\/|seed 00\d|_[0-9a-f]{16}\.txt/.test(text))
        bad.push(`${path} cites a document the repository does not have`);
      for (const m of text.matchAll(/\brules? (\d+)((?:, \d+)*)(?: and (\d+))?/g)) {
        const cited = [m[1], ...(m[2] ?? "").split(", ").slice(1), m[3]].filter(Boolean);
        for (const n of cited) if (!rules.has(Number(n))) bad.push(`${path} cites rule ${n}`);
      }
    }
    expect(bad).toEqual([]);
  });
});
