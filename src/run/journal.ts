/** One finished step of a run, as the journal keeps it. */
export interface StepRecord {
  readonly runId: string;
  readonly step: string;
  readonly status: "ok" | "failed";
  /** The step's result (JSON), when it succeeded. */
  readonly value?: unknown;
  /** What went wrong (secrets masked), when it failed. */
  readonly error?: string;
  /** When it finished, on the run's clock. */
  readonly at: number;
}

/**
 * Where a run records its finished steps, so that a run started again with the same id
 * resumes at the step that failed instead of from the start (docs/architecture.md,
 * rule 14). In-memory and SQLite (node:sqlite) journals ship; the interface is what a
 * Postgres or Redis one implements.
 */
export interface Journal {
  /** The step's record, if the run finished it. */
  get(runId: string, step: string): StepRecord | undefined | Promise<StepRecord | undefined>;
  /** Records a step. */
  put(record: StepRecord): void | Promise<void>;
  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] | Promise<StepRecord[]>;
  /** Takes or renews the lease on a run for `owner` (wall time, shared by every worker);
   * false while another owner holds it. A journal without it cannot keep two workers off
   * one run. */
  claim?(runId: string, owner: string, leaseMs: number): boolean | Promise<boolean>;
  /** Lets go of the lease, if `owner` holds it. */
  release?(runId: string, owner: string): void | Promise<void>;
  /** Who holds the lease on a run and until when (wall time, ms), if anyone does: what a
   * refused worker is told. */
  holder?(runId: string): Holder | undefined | Promise<Holder | undefined>;
}

/** The worker holding a run's lease, and when the lease runs out (wall time, ms). */
export interface Holder {
  readonly owner: string;
  readonly expiresAt: number;
}

/** A journal could not read or write: names the store, the run and the step. */
export class JournalError extends Error {
  override name = "BreakwaterJournalError";
  constructor(message: string, cause: unknown) {
    super(`${message}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** Another worker holds the run's lease: this one must not run its steps. */
export class RunClaimedError extends Error {
  override name = "BreakwaterRunClaimedError";
  readonly runId: string;
  /** Who holds it and until when, where the journal can tell. */
  readonly holder: Holder | undefined;
  constructor(runId: string, holder?: Holder, now = Date.now()) {
    super(
      holder === undefined
        ? `run "${runId}" is held by another worker (its lease has not expired)`
        : `run "${runId}" is held by worker "${holder.owner}" until ${new Date(holder.expiresAt).toISOString()} (${Math.max(0, Math.ceil((holder.expiresAt - now) / 1000))} s from now): it runs there, or that worker stopped without letting go and its lease runs out then. To go on with it now, start it as that worker (new Run({ id: "${runId}", owner: "${holder.owner}", ... }): the same owner takes its runs back at once), or wait`,
    );
    this.runId = runId;
    this.holder = holder;
  }
}

/** A journal in this process's memory: resumes a run within one process. */
export class MemoryJournal implements Journal {
  readonly #records = new Map<string, StepRecord>();

  /** The step's record, if the run finished it. */
  get(runId: string, step: string): StepRecord | undefined {
    return this.#records.get(`${runId}\u0000${step}`);
  }

  readonly #claims = new Map<string, { owner: string; until: number }>();

  /** Records a step; one recorded "ok" is never overwritten. */
  put(record: StepRecord): void {
    const key = `${record.runId}\u0000${record.step}`;
    if (this.#records.get(key)?.status === "ok") return;
    this.#records.set(key, record);
  }

  /** Takes or renews the lease on a run (within this process). */
  claim(runId: string, owner: string, leaseMs: number): boolean {
    const now = Date.now();
    const held = this.#claims.get(runId);
    if (held !== undefined && held.owner !== owner && held.until > now) return false;
    this.#claims.set(runId, { owner, until: now + leaseMs });
    return true;
  }

  /** Lets go of the lease, if `owner` holds it. */
  holder(runId: string): Holder | undefined {
    const held = this.#claims.get(runId);
    return held === undefined || held.until <= Date.now()
      ? undefined
      : { owner: held.owner, expiresAt: held.until };
  }

  release(runId: string, owner: string): void {
    if (this.#claims.get(runId)?.owner === owner) this.#claims.delete(runId);
  }

  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] {
    return [...this.#records.values()].filter((r) => r.runId === runId).sort((a, b) => a.at - b.at);
  }
}
