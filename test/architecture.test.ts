import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

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
const ENTRIES = new Set(["index.ts", "internal.ts", "testing/index.ts", "storm/index.ts"]);
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
  otel: LIBRARY,
  redis: LIBRARY,
  testing: (t) => ENTRIES.has(t),
  storm: (t) => ENTRIES.has(t),
  cli: (t) => ENTRIES.has(t),
};

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

  it("no function in core/ or policy/ runs past 40 lines", () => {
    const long: string[] = [];
    for (const { path, text } of SOURCES) {
      if (!["core", "policy"].includes(folder(path))) continue;
      const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
      const visit = (n: ts.Node) => {
        if (ts.isFunctionLike(n) && "body" in n && n.body) {
          const from = sf.getLineAndCharacterOfPosition(n.getStart()).line;
          const to = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
          if (to - from + 1 > 40) long.push(`${path}:${from + 1} (${to - from + 1} lines)`);
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    expect(long).toEqual([]);
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
