import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The README's blocks that name the file a user saves them as (`// quickstart.mjs` on their
 * first line): what a new user copies into a fresh project, by file name.
 */
export function namedBlocks(root: string): Map<string, string> {
  const text = readFileSync(join(root, "README.md"), "utf8");
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^```ts\n\/\/ ([\w-]+\.m[jt]s)\n([\s\S]*?)^```/gm))
    out.set(m[1]!, m[2]!);
  return out;
}
