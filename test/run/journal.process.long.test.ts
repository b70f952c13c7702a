import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe } from "vitest";
import { killedAndResumed } from "./fixtures/killed-and-resumed.ts";

// Long tier: a journaled run on SQLite killed with SIGKILL at 20 random points and resumed
// each time (journal.process.test.ts kills it once): twenty process starts and kills.
const dir = mkdtempSync(join(tmpdir(), "bw-journal-long-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const paths = () => ({ db: join(dir, `j${++files}.db`), service: join(dir, `s${files}.db`) });

describe("SqliteJournal across processes, killed again and again", () => {
  killedAndResumed(20, paths);
});
