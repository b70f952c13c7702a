import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

/** The packages docs/sdks.md says it tests at their latest, as the lockfile installs them. */
const LATEST = [
  "openai",
  "@anthropic-ai/sdk",
  "@google/genai",
  "undici",
  "ai",
  "@ai-sdk/provider",
  "@langchain/core",
  "langchain",
  "@mastra/core",
  "@mariozechner/pi-ai",
  "@openai/agents",
];

describe("docs/sdks.md's table of versions tested", () => {
  it("names, for each package, the version the suite runs on", () => {
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
      packages: Record<string, { version?: string }>;
    };
    const page = readFileSync(join(ROOT, "docs/sdks.md"), "utf8");
    const table =
      /^\| package \| peer range \| latest tested \| oldest tested \|\n\|[-|]+\|\n((?:\|.*\n)+)/m.exec(
        page,
      );
    expect(table, "the table of versions").not.toBeNull();
    const rows = table![1]!
      .trimEnd()
      .split("\n")
      .map((l) => l.split(" | ").map((c) => c.replace(/^\| /, "").trim()));
    for (const name of LATEST) {
      const installed = lock.packages[`node_modules/${name}`]?.version;
      expect(installed, name).toBeDefined();
      // Each row whose first cell names the package: its "latest tested" cell lists it.
      const named = rows.filter((r) => r[0]!.split(", ").includes(name));
      expect(named.length, name).toBeGreaterThan(0);
      for (const r of named)
        expect(r[2]!.match(/\d+\.\d+\.\d+/g) ?? [], `${name}: ${r[2]}`).toContain(installed);
    }
  });
});
