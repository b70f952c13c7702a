import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? files(join(dir, d.name)) : [join(dir, d.name)],
  );
}

describe("the API reference (docs/api, TypeDoc)", () => {
  it("every export is documented, and docs/api is what the doc comments say now", {
    timeout: 60_000,
  }, async () => {
    const out = mkdtempSync(join(tmpdir(), "breakwater-api-"));
    try {
      const typedoc = join(ROOT, "node_modules/typedoc/bin/typedoc");
      // Warnings are errors: an export without a doc comment fails here.
      await run(process.execPath, [typedoc, "--treatWarningsAsErrors", "--out", out], {
        cwd: ROOT,
      });
      const fresh = files(out)
        .map((f) => relative(out, f))
        .sort();
      const committed = files(join(ROOT, "docs/api"))
        .map((f) => relative(join(ROOT, "docs/api"), f))
        .sort();
      expect(committed, "docs/api is stale: run npm run docs").toEqual(fresh);
      for (const f of fresh)
        expect(
          readFileSync(join(ROOT, "docs/api", f), "utf8"),
          `docs/api/${f} is stale: run npm run docs`,
        ).toBe(readFileSync(join(out, f), "utf8"));
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it("names each module by its import path, the package's exports, each with an example", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const paths = Object.keys(pkg.exports)
      .filter((k) => k !== "./package.json")
      .map((k) => `breakwater${k.slice(1)}`)
      .sort();
    const index = readFileSync(join(ROOT, "docs/api/README.md"), "utf8");
    const modules = [...index.matchAll(/^- \[([^\]]+)\]/gm)].map((m) => m[1]).sort();
    expect(modules).toEqual(paths);
    for (const m of modules) {
      const page = readFileSync(join(ROOT, "docs/api", m!, "README.md"), "utf8");
      expect(page, m).toMatch(new RegExp(`## Example\\n\\n\`\`\`ts\\n[\\s\\S]*from "${m}"`));
    }
  });
});
