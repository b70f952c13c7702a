import { DatabaseSync } from "node:sqlite";
import type { Journal, StepRecord } from "./journal.ts";

interface Row {
  run_id: string;
  step: string;
  status: "ok" | "failed";
  value: string | null;
  error: string | null;
  at: number;
}

const toRecord = (r: Row): StepRecord => ({
  runId: r.run_id,
  step: r.step,
  status: r.status,
  at: r.at,
  ...(r.value !== null && { value: JSON.parse(r.value) }),
  ...(r.error !== null && { error: r.error }),
});

/** A journal in a SQLite file (node:sqlite, no native build): survives the process. */
export class SqliteJournal implements Journal {
  readonly #db: DatabaseSync;

  /** `path` is a file, or ":memory:" (the default). */
  constructor(path = ":memory:") {
    if (typeof path !== "string" || path === "")
      throw new TypeError(
        `SqliteJournal: "path" must be a file path or ":memory:"; got ${String(path)}`,
      );
    this.#db = new DatabaseSync(path);
    this.#db.exec(`CREATE TABLE IF NOT EXISTS breakwater_steps (
      run_id TEXT NOT NULL, step TEXT NOT NULL, status TEXT NOT NULL,
      value TEXT, error TEXT, at REAL NOT NULL, PRIMARY KEY (run_id, step))`);
  }

  /** The step's record, if the run finished it. */
  get(runId: string, step: string): StepRecord | undefined {
    const row = this.#db
      .prepare("SELECT * FROM breakwater_steps WHERE run_id = ? AND step = ?")
      .get(runId, step) as Row | undefined;
    return row === undefined ? undefined : toRecord(row);
  }

  /** Records a step; a finished step is never overwritten by a later failure. */
  put(r: StepRecord): void {
    this.#db
      .prepare(
        "INSERT OR REPLACE INTO breakwater_steps (run_id, step, status, value, error, at) VALUES (?, ?, ?, ?, ?, ?)",
      )
      .run(
        r.runId,
        r.step,
        r.status,
        r.value === undefined ? null : JSON.stringify(r.value),
        r.error ?? null,
        r.at,
      );
  }

  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] {
    return (
      this.#db
        .prepare("SELECT * FROM breakwater_steps WHERE run_id = ? ORDER BY at, rowid")
        .all(runId) as unknown as Row[]
    ).map(toRecord);
  }

  /** Closes the database. */
  close(): void {
    this.#db.close();
  }
}
