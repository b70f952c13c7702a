/**
 * A step journal in PostgreSQL (on `pg`): runs resume across machines, with leases on
 * the database's clock and a sweep that takes over runs whose worker died.
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { Run } from "breakwater";
 * import { PostgresJournal } from "breakwater/postgres";
 *
 * export async function resume(id: string) {
 *   const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 *   const journal = await PostgresJournal.open({ pool }); // creates or migrates its schema
 *   const run = new Run({ id, journal });
 *   await run.step("plan", async () => "refund order 77");
 *   await run.release();
 * }
 * ```
 * @module breakwater/postgres
 */
import type { Pool, PoolClient } from "pg";
import { ConfigError, opt, parseOptions } from "../core/validate.ts";
import { type Holder, type Journal, JournalError, type Lease, type StepRecord } from "./journal.ts";

/** Options of a `PostgresJournal`. */
export interface PostgresJournalOptions {
  /** A `pg` Pool (yours: its size, TLS and credentials). */
  pool: Pool;
  /** The schema the tables live in (created if missing). @default "breakwater" */
  schema?: string;
}

interface Row {
  run_id: string;
  step: string;
  status: "ok" | "failed";
  value: unknown;
  /** SQL NULL (no value) as opposed to JSON null, which pg reads back as null too. */
  absent: boolean;
  error: string | null;
  at: number;
}

const COLUMNS = "run_id, step, status, value, value IS NULL AS absent, error, at";

const toRecord = (r: Row): StepRecord => ({
  runId: r.run_id,
  step: r.step,
  status: r.status,
  at: Number(r.at),
  ...(!r.absent && { value: r.value }),
  ...(r.error !== null && { error: r.error }),
});

/** The schema's versions, in order; each runs once, in one transaction, recorded in
 * `migrations`. Never edit one that shipped: add the next. */
const MIGRATIONS: readonly ((s: string) => string)[] = [
  (s) => `
    CREATE TABLE ${s}.steps (
      run_id TEXT NOT NULL, step TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
      value JSONB, error TEXT, at DOUBLE PRECISION NOT NULL, seq BIGSERIAL,
      PRIMARY KEY (run_id, step));
    CREATE TABLE ${s}.claims (
      run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
    CREATE INDEX claims_expiry ON ${s}.claims (expires_at);`,
  // Fencing: each claim's generation, which every write of its worker carries; a released
  // claim keeps its row (and generation), marked so that no sweep takes the run over.
  (s) => `
    ALTER TABLE ${s}.claims ADD COLUMN generation BIGINT NOT NULL DEFAULT 0,
      ADD COLUMN released BOOLEAN NOT NULL DEFAULT false;`,
];

/** The fence's parameters after a write's own. */
const fenceParams = (lease: Lease | undefined) =>
  lease === undefined ? [] : [lease.owner, lease.generation];

/** One advisory-lock key for migrations, so workers starting together migrate once. */
const MIGRATION_LOCK = 0x62_77_6a_6e; // "bwjn"

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const POOL = "a pg Pool (new Pool({ connectionString }))";
const SPEC = {
  pool: opt.any<Pool>((p) => typeof (p as Pool | null)?.query === "function", POOL),
  schema: opt.str({ pattern: SCHEMA_NAME, allowed: "a lower-case SQL name (a-z, 0-9, _)" }),
};

/**
 * The step journal on Postgres (`pg`): a run crashed on one machine resumes on another
 * (docs/architecture.md, rule 14). Leases use the database's clock, so machines need not
 * agree on the time; `takeOver` finds runs whose worker died (their lease expired) with
 * `FOR UPDATE SKIP LOCKED`, so many workers can sweep at once without taking the same
 * run. The schema is created and migrated by the library (`migrate`, run by `open`).
 */
export class PostgresJournal implements Journal {
  readonly #pool: Pool;
  readonly #s: string;

  private constructor(pool: Pool, schema: string) {
    this.#pool = pool;
    this.#s = schema;
  }

  /** Connects, migrates the schema to the latest version, and returns the journal. */
  static async open(options: PostgresJournalOptions): Promise<PostgresJournal> {
    const { pool, schema } = parseOptions("PostgresJournal", SPEC, options);
    if (pool === undefined) throw new ConfigError("PostgresJournal", "pool", pool, POOL);
    const j = new PostgresJournal(pool, schema ?? "breakwater");
    await j.migrate();
    return j;
  }

  async #q<R>(what: string, sql: string, params: unknown[] = []): Promise<R[]> {
    try {
      return (await this.#pool.query(sql, params)).rows as R[];
    } catch (error) {
      throw new JournalError(`PostgresJournal(${this.#s}): could not ${what}`, error);
    }
  }

  /** Brings the schema to the latest version; safe to call from many workers at once.
   * Returns the version it is at. */
  async migrate(): Promise<number> {
    let client: PoolClient | undefined;
    try {
      client = await this.#pool.connect();
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.#s}`);
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.#s}.migrations (
        version INT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
      const { rows } = await client.query(`SELECT max(version) AS v FROM ${this.#s}.migrations`);
      const at = Number(rows[0]?.v ?? 0);
      for (let v = at; v < MIGRATIONS.length; v++) {
        await client.query(MIGRATIONS[v]!(this.#s));
        await client.query(`INSERT INTO ${this.#s}.migrations (version) VALUES ($1)`, [v + 1]);
      }
      await client.query("COMMIT");
      return MIGRATIONS.length;
    } catch (error) {
      await client?.query("ROLLBACK").catch(() => {});
      throw new JournalError(`PostgresJournal(${this.#s}): could not migrate the schema`, error);
    } finally {
      client?.release();
    }
  }

  async get(runId: string, step: string): Promise<StepRecord | undefined> {
    const rows = await this.#q<Row>(
      `read step "${step}" of run "${runId}"`,
      `SELECT ${COLUMNS} FROM ${this.#s}.steps WHERE run_id = $1 AND step = $2`,
      [runId, step],
    );
    return rows[0] === undefined ? undefined : toRecord(rows[0]);
  }

  /** The claim row a fenced write checks, locked FOR SHARE: a takeover (which updates the
   * row) waits for the write's transaction, and a write after it sees the new generation. */
  #fence(lease: Lease | undefined, at: number): string {
    return lease === undefined
      ? "SELECT true AS held"
      : `SELECT true AS held FROM ${this.#s}.claims
         WHERE run_id = $1 AND owner = $${at} AND generation = $${at + 1} FOR SHARE`;
  }

  /** Records a step; one recorded "ok" is never overwritten; false (nothing written) when
   * `lease` was taken over. */
  async put(r: StepRecord, lease?: Lease): Promise<boolean> {
    const value = r.value === undefined ? null : JSON.stringify(r.value);
    const rows = await this.#q<{ held: boolean }>(
      `record step "${r.step}" of run "${r.runId}"`,
      `WITH fence AS (${this.#fence(lease, 7)}),
       written AS (
         INSERT INTO ${this.#s}.steps (run_id, step, status, value, error, at)
         SELECT $1, $2, $3, $4::jsonb, $5, $6 WHERE EXISTS (SELECT 1 FROM fence)
         ON CONFLICT (run_id, step) DO UPDATE SET
           status = EXCLUDED.status, value = EXCLUDED.value, error = EXCLUDED.error, at = EXCLUDED.at
         WHERE ${this.#s}.steps.status <> 'ok')
       SELECT held FROM fence`,
      [r.runId, r.step, r.status, value, r.error ?? null, r.at, ...fenceParams(lease)],
    );
    return rows.length > 0;
  }

  /** Deletes these steps of a run; false (nothing deleted) when `lease` was taken over. */
  async forget(runId: string, steps: readonly string[], lease?: Lease): Promise<boolean> {
    const rows = await this.#q<{ held: boolean }>(
      `forget ${steps.length} steps of run "${runId}"`,
      `WITH fence AS (${this.#fence(lease, 3)}),
       gone AS (DELETE FROM ${this.#s}.steps
         WHERE run_id = $1 AND step = ANY($2::text[]) AND EXISTS (SELECT 1 FROM fence))
       SELECT held FROM fence`,
      [runId, steps, ...fenceParams(lease)],
    );
    return rows.length > 0;
  }

  async steps(runId: string): Promise<StepRecord[]> {
    const rows = await this.#q<Row>(
      `read the steps of run "${runId}"`,
      `SELECT ${COLUMNS} FROM ${this.#s}.steps WHERE run_id = $1 ORDER BY at, seq`,
      [runId],
    );
    return rows.map(toRecord);
  }

  /** Takes (answering the claim's generation) or, with `generation`, renews the lease on a
   * run (the database's clock): free, expired, or already `owner`'s; false while another
   * claim holds it. */
  async claim(
    runId: string,
    owner: string,
    leaseMs: number,
    generation?: number,
  ): Promise<number | false> {
    const rows = await this.#q<{ generation: string }>(
      `claim run "${runId}"`,
      generation === undefined
        ? `INSERT INTO ${this.#s}.claims (run_id, owner, expires_at, generation)
           VALUES ($1, $2, now() + $3 * interval '1 millisecond', 1)
           ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner,
             expires_at = EXCLUDED.expires_at, released = false,
             generation = ${this.#s}.claims.generation + 1
           WHERE ${this.#s}.claims.owner = EXCLUDED.owner OR ${this.#s}.claims.expires_at <= now()
           RETURNING generation`
        : `UPDATE ${this.#s}.claims SET expires_at = now() + $3 * interval '1 millisecond'
           WHERE run_id = $1 AND owner = $2 AND generation = $4 AND NOT released
           RETURNING generation`,
      generation === undefined ? [runId, owner, leaseMs] : [runId, owner, leaseMs, generation],
    );
    return rows[0] === undefined ? false : Number(rows[0].generation);
  }

  /** Who holds the lease on `runId` and until when, if anyone does. */
  async holder(runId: string): Promise<Holder | undefined> {
    const rows = await this.#q<{ owner: string; expires_at: Date }>(
      `read the lease of run "${runId}"`,
      `SELECT owner, expires_at FROM ${this.#s}.claims WHERE run_id = $1 AND expires_at > now()`,
      [runId],
    );
    const r = rows[0];
    return r === undefined
      ? undefined
      : { owner: r.owner, expiresAt: new Date(r.expires_at).getTime() };
  }

  /** Lets go of the lease, if `owner` holds it (with `generation`, that claim). The row
   * stays, expired and marked released, so the next claim still takes a later generation
   * and no sweep takes a finished run over. */
  async release(runId: string, owner: string, generation?: number): Promise<void> {
    await this.#q(
      `release run "${runId}"`,
      `UPDATE ${this.#s}.claims SET expires_at = now(), released = true
       WHERE run_id = $1 AND owner = $2 AND ($3::bigint IS NULL OR generation = $3)`,
      [runId, owner, generation ?? null],
    );
  }

  /**
   * Takes over up to `limit` runs whose worker died (their lease expired without a
   * release) for `owner`, and returns their ids: start each with `new Run({ id, owner,
   * journal })` and it resumes at its failed step. Workers sweeping together never get
   * the same run (`FOR UPDATE SKIP LOCKED`).
   */
  async takeOver(owner: string, leaseMs: number, limit = 10): Promise<string[]> {
    const rows = await this.#q<{ run_id: string }>(
      "take over expired runs",
      `UPDATE ${this.#s}.claims c SET owner = $1, expires_at = now() + $2 * interval '1 millisecond',
         generation = c.generation + 1
       FROM (SELECT run_id FROM ${this.#s}.claims WHERE expires_at <= now() AND NOT released
             ORDER BY expires_at LIMIT $3 FOR UPDATE SKIP LOCKED) expired
       WHERE c.run_id = expired.run_id
       RETURNING c.run_id`,
      [owner, leaseMs, limit],
    );
    return rows.map((r) => r.run_id);
  }
}
