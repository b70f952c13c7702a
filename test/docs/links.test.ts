import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { guidePages } from "./pages.ts";

const ROOT = resolve(import.meta.dirname, "../..");

/** Markdown without its fenced code (a `#` or `](` there is code, not a heading or link). */
const prose = (text: string): string => text.replace(/^```[\s\S]*?^```/gm, "");

/** The anchors GitHub gives a page's headings: lowercased, punctuation dropped, spaces to
 * hyphens, a repeated one suffixed -1, -2. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, title] of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = title!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Every relative link of a page (images included), as written. */
function links(text: string): string[] {
  return [...prose(text).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((l) => !/^[a-z]+:/i.test(l));
}

const PAGES = guidePages(ROOT);

describe("the README and the guide link only to what exists", () => {
  it("a heading's anchor is GitHub's", () => {
    expect([
      ...anchors(
        "# A fleet: shared state on Redis\n## Per SDK\n## Per SDK\n### `audit`: how many?",
      ),
    ]).toEqual(["a-fleet-shared-state-on-redis", "per-sdk", "per-sdk-1", "audit-how-many"]);
  });

  it("the README is a guide's front page: under 400 lines, every page linked from it", () => {
    const readme = PAGES.get("README.md")!;
    expect(readme.split("\n").length).toBeLessThan(400);
    const linked = new Set(links(readme).map((l) => l.split("#")[0]));
    const pages = [...PAGES.keys()].filter(
      (p) => p !== "README.md" && p !== "docs/architecture.md",
    );
    expect(pages.length).toBeGreaterThanOrEqual(15);
    expect(pages.filter((p) => !linked.has(p))).toEqual([]);
  });

  it.each([...PAGES.keys()])("%s", (page) => {
    const text = PAGES.get(page)!;
    const broken: string[] = [];
    for (const link of links(text)) {
      const [path, anchor] = link.split("#") as [string, string | undefined];
      const target = path === "" ? page : normalize(join(dirname(page), path));
      const file = join(ROOT, target);
      if (!existsSync(file)) broken.push(`${link}: no ${target}`);
      else if (anchor !== undefined && target.endsWith(".md")) {
        const known = target === page ? anchors(text) : anchors(readFileSync(file, "utf8"));
        if (!known.has(anchor)) broken.push(`${link}: no heading #${anchor} in ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
