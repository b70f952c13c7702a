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
  /** Records a step. With a `lease`, only while that lease still holds the run: false when
   * another claim took it over since (the write is refused, nothing changes). */
  // biome-ignore lint/suspicious/noConfusingVoidType: a journal written before fencing returns nothing
  put(record: StepRecord, lease?: Lease): void | boolean | Promise<void | boolean>;
  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] | Promise<StepRecord[]>;
  /**
   * Takes or renews the lease on a run for `owner` (wall time, shared by every worker).
   * Without `generation`, a new claim: granted when the run is free, its lease expired, or
   * `owner` holds it, and answered with the claim's generation, one more than the last
   * (an earlier claim of the same owner, a frozen process under a restarted pod's name, is
   * fenced off by it). With `generation`, a renewal: granted only while that claim still
   * holds. False when refused. A journal answering `true` grants leases without fencing;
   * one without `claim` cannot keep two workers off one run.
   */
  claim?(
    runId: string,
    owner: string,
    leaseMs: number,
    generation?: number,
  ): boolean | number | Promise<boolean | number>;
  /** Lets go of the lease, if `owner` holds it (and with `generation`, only that claim). */
  release?(runId: string, owner: string, generation?: number): void | Promise<void>;
  /** Deletes these steps of a run (a journal cut where a resumed run went another way). */
  forget?(
    runId: string,
    steps: readonly string[],
    lease?: Lease,
    // biome-ignore lint/suspicious/noConfusingVoidType: as put
  ): void | boolean | Promise<void | boolean>;
  /** Who holds the lease on a run and until when (wall time, ms), if anyone does: what a
   * refused worker is told. */
  holder?(runId: string): Holder | undefined | Promise<Holder | undefined>;
}

/** The worker holding a run's lease, and when the lease runs out (wall time, ms). */
export interface Holder {
  readonly owner: string;
  readonly expiresAt: number;
}

/** A claim on a run: the fencing token every write of its worker carries
 * (docs/architecture.md, rule 14). */
export interface Lease {
  readonly owner: string;
  /** Which claim of the run this is: each new claim takes the next one. */
  readonly generation: number;
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
  /** This worker held the run and lost it: its lease ran out (a pause longer than the
   * lease, a frozen process) and another claim took the run over; its writes are refused. */
  readonly takenOver: boolean;
  constructor(runId: string, holder?: Holder, now = Date.now(), takenOver = false) {
    super(
      takenOver
        ? `run "${runId}" was taken over${holder === undefined ? "" : ` by worker "${holder.owner}"`} while this worker ran it (its lease ran out before it was renewed: a pause longer than leaseMs); this worker's results are not recorded, the new owner's stand`
        : holder === undefined
          ? `run "${runId}" is held by another worker (its lease has not expired)`
          : `run "${runId}" is held by worker "${holder.owner}" until ${new Date(holder.expiresAt).toISOString()} (${Math.max(0, Math.ceil((holder.expiresAt - now) / 1000))} s from now): it runs there, or that worker stopped without letting go and its lease runs out then. To go on with it now, start it as that worker (new Run({ id: "${runId}", owner: "${holder.owner}", ... }): the same owner takes its runs back at once), or wait`,
    );
    this.runId = runId;
    this.holder = holder;
    this.takenOver = takenOver;
  }
}

/** A resumed run asked, at some place, for another call than the journal holds there, and
 * the run was told to fail (`divergence: "fail"`) or the journal cannot forget. */
export class JournalDivergenceError extends Error {
  override name = "BreakwaterJournalDivergenceError";
  readonly runId: string;
  /** The call's place in the run (1 is its first journaled call). */
  readonly place: number;
  constructor(runId: string, place: number, kind: string, recorded: string | undefined) {
    super(
      `run "${runId}" went another way on resume: its call #${place} (${kind}) is not the request the journal recorded there (${recorded ?? "another call"}). The agent is not deterministic up to here (a changed prompt, a tool that answers differently, calls started in another order); with divergence: "cut" (the default) the journal is cut there and the run goes on live`,
    );
    this.runId = runId;
    this.place = place;
  }
}

/** A journal in this process's memory: resumes a run within one process. */
export class MemoryJournal implements Journal {
  readonly #records = new Map<string, StepRecord>();
  readonly #claims = new Map<string, { owner: string; until: number; generation: number }>();

  /** The step's record, if the run finished it. */
  get(runId: string, step: string): StepRecord | undefined {
    return this.#records.get(`${runId}\u0000${step}`);
  }

  /** Whether `lease` still holds the run (no lease: unfenced, it does). */
  #holds(runId: string, lease?: Lease): boolean {
    if (lease === undefined) return true;
    const c = this.#claims.get(runId);
    return c?.owner === lease.owner && c.generation === lease.generation;
  }

  /** Records a step; one recorded "ok" is never overwritten; false when `lease` was taken
   * over. */
  put(record: StepRecord, lease?: Lease): boolean {
    if (!this.#holds(record.runId, lease)) return false;
    const key = `${record.runId}\u0000${record.step}`;
    if (this.#records.get(key)?.status !== "ok") this.#records.set(key, record);
    return true;
  }

  /** Deletes these steps of a run; false when `lease` was taken over. */
  forget(runId: string, steps: readonly string[], lease?: Lease): boolean {
    if (!this.#holds(runId, lease)) return false;
    for (const step of steps) this.#records.delete(`${runId}\u0000${step}`);
    return true;
  }

  /** Takes (a new generation) or renews (`generation`) the lease on a run. */
  claim(runId: string, owner: string, leaseMs: number, generation?: number): number | false {
    const now = Date.now();
    const c = this.#claims.get(runId);
    if (generation !== undefined) {
      if (c?.owner !== owner || c.generation !== generation) return false;
      c.until = now + leaseMs;
      return generation;
    }
    if (c !== undefined && c.owner !== owner && c.until > now) return false;
    const next = (c?.generation ?? 0) + 1;
    this.#claims.set(runId, { owner, until: now + leaseMs, generation: next });
    return next;
  }

  /** Who holds the lease on a run, if anyone does. */
  holder(runId: string): Holder | undefined {
    const held = this.#claims.get(runId);
    return held === undefined || held.until <= Date.now()
      ? undefined
      : { owner: held.owner, expiresAt: held.until };
  }

  /** Lets go of the lease, if `owner` holds it (and with `generation`, that claim). The
   * generation stays: the next claim still takes a later one. */
  release(runId: string, owner: string, generation?: number): void {
    const c = this.#claims.get(runId);
    if (c?.owner === owner && (generation === undefined || c.generation === generation))
      c.until = 0;
  }

  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] {
    return [...this.#records.values()].filter((r) => r.runId === runId).sort((a, b) => a.at - b.at);
  }
}
