import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** The README and the guide's pages (docs/*.md; the generated API reference is apart), by
 * path from the root, with their text. */
export function guidePages(root: string): Map<string, string> {
  const pages = [
    "README.md",
    ...readdirSync(join(root, "docs"))
      .filter((f) => f.endsWith(".md"))
      .sort()
      .map((f) => `docs/${f}`),
  ];
  return new Map(pages.map((p) => [p, readFileSync(join(root, p), "utf8")]));
}

/**
 * The blocks of the README and the guide that name the file a user saves them as
 * (`// quickstart.mjs` on their first line): what a new user copies into a fresh project,
 * by file name.
 */
export function namedBlocks(root: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [page, text] of guidePages(root))
    for (const m of text.matchAll(/^```ts\n\/\/ ([\w-]+\.m[jt]s)\n([\s\S]*?)^```/gm)) {
      if (out.has(m[1]!)) throw new Error(`${page}: a second block named ${m[1]}`);
      out.set(m[1]!, m[2]!);
    }
  return out;
}
