/**
 * A step journal in SQLite (`node:sqlite`, Node >= 22.13, no native build): a run
 * resumes at the step that failed, across processes on one machine.
 *
 * @example
 * ```ts
 * import { Run } from "breakwater";
 * import { SqliteJournal } from "breakwater/sqlite";
 *
 * const run = new Run({ id: "order-77", journal: new SqliteJournal("runs.db") });
 * const plan = await run.step("plan", async () => "refund order 77"); // replayed on a resume
 * console.log(plan, run.stats.stepsReplayed);
 * await run.release(); // another worker may take the run at once
 * ```
 * @module breakwater/sqlite
 */
import type { DatabaseSync } from "node:sqlite";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import { type Holder, type Journal, JournalError, type Lease, type StepRecord } from "./journal.ts";

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

/** Options of a `SqliteJournal`. */
export interface SqliteJournalOptions {
  /** How long a write waits for another process's lock before it fails. @default 5000 */
  busyTimeoutMs?: number;
}

const SPEC = { busyTimeoutMs: opt.int({ default: 5000 }) };

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS breakwater_steps (
    run_id TEXT NOT NULL, step TEXT NOT NULL, status TEXT NOT NULL,
    value TEXT, error TEXT, at REAL NOT NULL, PRIMARY KEY (run_id, step));
  CREATE TABLE IF NOT EXISTS breakwater_claims (
    run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0);`;

/** A file made before leases had generations gets the column (once: the check and the
 * change run under the write lock, so processes opening it together change it once). */
function migrate(db: DatabaseSync): void {
  locked(db, () => {
    const columns = db.prepare("PRAGMA table_info(breakwater_claims)").all() as { name: string }[];
    if (!columns.some((c) => c.name === "generation"))
      db.exec("ALTER TABLE breakwater_claims ADD COLUMN generation INTEGER NOT NULL DEFAULT 0");
  });
}

/** Runs `fn` in a transaction holding the write lock (waiting the busy timeout for it). */
function locked<T>(db: DatabaseSync, fn: () => T): T {
  db.exec("BEGIN IMMEDIATE");
  try {
    const result = fn();
    db.exec("COMMIT");
    return result;
  } catch (error) {
    try {
      db.exec("ROLLBACK");
    } catch {} // the failure ended the transaction already
    throw error;
  }
}

/** node:sqlite, loaded when the first journal is made: a clear error where the Node in use
 * has none (before 22.13 it needs a flag; Node 20 has none at all). */
function sqlite(): typeof import("node:sqlite") {
  const found = process.getBuiltinModule?.("node:sqlite") as
    | typeof import("node:sqlite")
    | undefined;
  if (found !== undefined) return found;
  throw new Error(
    `breakwater/sqlite needs node:sqlite, built into Node >= 22.13 (24 recommended); this is Node ${process.versions.node}. Upgrade Node, or use MemoryJournal or breakwater/postgres`,
  );
}

/** Sleeps this thread (only while a database is being opened and another process holds
 * it: there is nothing to do meanwhile). */
const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Opens the file in WAL mode with its schema. Processes opening a new file at the same
 * instant contend for locks that SQLite's busy handler does not wait on (switching the
 * journal mode, the first schema): such an open is tried again, within the busy timeout.
 */
function openShared(path: string, busyMs: number): DatabaseSync {
  const until = Date.now() + busyMs;
  for (let wait = 5; ; wait = Math.min(2 * wait, 100)) {
    let db: DatabaseSync | undefined;
    try {
      db = new (sqlite().DatabaseSync)(path);
      db.exec(`PRAGMA busy_timeout = ${busyMs}`); // before anything that takes a lock
      db.exec("PRAGMA journal_mode = WAL");
      db.exec("PRAGMA synchronous = NORMAL"); // durable across a crash of the process
      db.exec(SCHEMA);
      migrate(db);
      return db;
    } catch (error) {
      db?.close();
      if (!/locked|busy/i.test(String((error as Error)?.message)) || Date.now() > until)
        throw error;
      pause(wait);
    }
  }
}

/** A step that finished "ok" stays so: a late failure, or a second worker, cannot undo it. */
const PUT = `INSERT INTO breakwater_steps (run_id, step, status, value, error, at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (run_id, step) DO UPDATE SET
    status = excluded.status, value = excluded.value, error = excluded.error, at = excluded.at
  WHERE breakwater_steps.status <> 'ok'`;

/** Takes a run's lease in one statement, the next generation: free, expired, or already
 * this owner's. */
const CLAIM = `INSERT INTO breakwater_claims (run_id, owner, expires_at, generation)
  VALUES (?, ?, ?, 1)
  ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at,
    generation = breakwater_claims.generation + 1
  WHERE breakwater_claims.owner = excluded.owner OR breakwater_claims.expires_at <= ?
  RETURNING generation`;

/** Renews a claim while it still holds the run. */
const RENEW = `UPDATE breakwater_claims SET expires_at = ?
  WHERE run_id = ? AND owner = ? AND generation = ? RETURNING generation`;

/** Whether a lease still holds its run: every fenced write checks it in its transaction. */
const HOLDS = `SELECT 1 FROM breakwater_claims WHERE run_id = ? AND owner = ? AND generation = ?`;

/**
 * A journal in a SQLite file (node:sqlite, no native build), safe for several processes on
 * one machine: WAL, a busy timeout, a lease per run id so two workers never run the same
 * run, and step results a late failure cannot overwrite (docs/architecture.md, rule 14).
 */
export class SqliteJournal implements Journal {
  readonly #db: DatabaseSync;
  readonly #path: string;

  /** `path` is a file, or ":memory:" (the default). */
  constructor(path = ":memory:", options: SqliteJournalOptions = {}) {
    const v = new Validator("SqliteJournal");
    if (typeof path !== "string" || path === "") v.fail("path", path, 'a file path or ":memory:"');
    const busy = parseOptions(v, SPEC, options).busyTimeoutMs;
    this.#path = path;
    sqlite(); // no node:sqlite here: say so plainly, not as a journal that failed to open
    this.#db = this.#run("open the journal", () => openShared(path, busy));
  }

  /** Runs one database operation; a failure names the file and what was being done. */
  #run<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      throw new JournalError(`SqliteJournal(${this.#path}): could not ${what}`, error);
    }
  }

  /** The step's record, if the run finished it. */
  get(runId: string, step: string): StepRecord | undefined {
    const row = this.#run(`read step "${step}" of run "${runId}"`, () =>
      this.#db
        .prepare("SELECT * FROM breakwater_steps WHERE run_id = ? AND step = ?")
        .get(runId, step),
    ) as Row | undefined;
    return row === undefined ? undefined : toRecord(row);
  }

  /** Records a step; one recorded "ok" is never overwritten; false (nothing written) when
   * `lease` was taken over. */
  put(r: StepRecord, lease?: Lease): boolean {
    const value = r.value === undefined ? null : JSON.stringify(r.value);
    return this.#fenced(`record step "${r.step}" of run "${r.runId}"`, r.runId, lease, () =>
      this.#db.prepare(PUT).run(r.runId, r.step, r.status, value, r.error ?? null, r.at),
    );
  }

  /** Deletes these steps of a run; false (nothing deleted) when `lease` was taken over. */
  forget(runId: string, steps: readonly string[], lease?: Lease): boolean {
    const del = this.#db.prepare("DELETE FROM breakwater_steps WHERE run_id = ? AND step = ?");
    return this.#fenced(`forget ${steps.length} steps of run "${runId}"`, runId, lease, () => {
      for (const step of steps) del.run(runId, step);
    });
  }

  /** Writes under the write lock, only while `lease` holds the run: a claim taken between
   * the check and the write waits for this transaction (SQLite has one writer). */
  #fenced(what: string, runId: string, lease: Lease | undefined, write: () => void): boolean {
    return this.#run(what, () => {
      if (lease === undefined) {
        write();
        return true;
      }
      return locked(this.#db, () => {
        const holds =
          this.#db.prepare(HOLDS).get(runId, lease.owner, lease.generation) !== undefined;
        if (holds) write();
        return holds;
      });
    });
  }

  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] {
    const rows = this.#run(`read the steps of run "${runId}"`, () =>
      this.#db
        .prepare("SELECT * FROM breakwater_steps WHERE run_id = ? ORDER BY at, rowid")
        .all(runId),
    ) as unknown as Row[];
    return rows.map(toRecord);
  }

  /** Takes (answering the claim's generation) or, with `generation`, renews the lease on
   * `runId` for `owner` until `leaseMs` from now (wall time, shared by every process);
   * false while another claim holds it. */
  claim(runId: string, owner: string, leaseMs: number, generation?: number): number | false {
    const now = Date.now();
    const row = this.#run(`claim run "${runId}"`, () =>
      generation === undefined
        ? this.#db.prepare(CLAIM).get(runId, owner, now + leaseMs, now)
        : this.#db.prepare(RENEW).get(now + leaseMs, runId, owner, generation),
    ) as { generation: number } | undefined;
    return row === undefined ? false : Number(row.generation);
  }

  /** Who holds the lease on `runId` and until when, if anyone does. */
  holder(runId: string): Holder | undefined {
    const row = this.#run(`read the lease of run "${runId}"`, () =>
      this.#db
        .prepare(
          "SELECT owner, expires_at FROM breakwater_claims WHERE run_id = ? AND expires_at > ?",
        )
        .get(runId, Date.now()),
    ) as { owner: string; expires_at: number } | undefined;
    return row === undefined ? undefined : { owner: row.owner, expiresAt: Number(row.expires_at) };
  }

  /** Lets go of the lease, if `owner` holds it (with `generation`, that claim). The row
   * stays, expired, so the next claim still takes a later generation. */
  release(runId: string, owner: string, generation?: number): void {
    this.#run(`release run "${runId}"`, () =>
      this.#db
        .prepare(
          "UPDATE breakwater_claims SET expires_at = 0 WHERE run_id = ? AND owner = ? AND (? IS NULL OR generation = ?)",
        )
        .run(runId, owner, generation ?? null, generation ?? null),
    );
  }

  /** Closes the database. */
  close(): void {
    this.#db.close();
  }
}
