import { type Clock, systemClock } from "../core/clock.ts";
import type { Ledger } from "../core/ledger.ts";
import type { Usage } from "../core/usage.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import { CallLog, inStepOf } from "./calls.ts";
import { partsOf, type RunParts, readRunParts } from "./internal.ts";
import { type Journal, type Lease, RunClaimedError } from "./journal.ts";
import { RunLimits, type RunStats } from "./limits.ts";
import type { RequestKey } from "./request-key.ts";
import { runStep } from "./steps.ts";
import { ToolMemo } from "./tool-memo.ts";

export type { RunStats } from "./limits.ts";

/** Options of a `Run`. */
export interface RunOptions {
  /** Identifies the run in idempotency keys and journals. @default a random UUID; for a
   * child run, its parent's id and its number among the parent's children ("<id>.1") */
  id?: string;
  /** The whole run's deadline in ms, set once at construction. @default none */
  deadlineMs?: number;
  /** Provider attempts across every call of the run (not per call). @default Infinity */
  maxAttempts?: number;
  /** Tokens (input + output, billed) the run may spend. @default Infinity */
  maxTokens?: number;
  /** Stop once wasted (retry) tokens exceed this share of `maxTokens` (or of billed
   * tokens when there is no allowance), e.g. 0.5. @default 1 (no cap) */
  maxRetryShare?: number;
  /** Tool failures the run tolerates before it ends with `run-tool-failures`.
   * @default Infinity */
  maxToolFailures?: number;
  /** The share of the run's remaining time one call may take, leaving room for the run
   * to finish cleanly. @default 0.8 */
  callShare?: number;
  /** @default systemClock */
  clock?: Clock;
  /** Records finished steps (see `step`), so a run started again with the same `id`
   * resumes at the step that failed. @default none */
  journal?: Journal;
  /** Where this run's calls stand in a rate limiter's queue: higher goes first.
   * @default 0; a child run: its parent's minus 1 (the parent goes first) */
  priority?: number;
  /** Who runs this run, for the journal's lease: a worker started again under the same
   * name (a restarted pod) takes its runs back at once; another waits out the lease.
   * @default this process (one random id per process) */
  owner?: string;
  /** How long the journal's lease on this run lasts; taken at every step and renewed
   * while one runs, so a worker that dies lets go of it within this. @default 60000 */
  leaseMs?: number;
  /** A resumed run that asks, at some place, for another model or tool call than the
   * journal recorded there: "cut" forgets what the journal holds from there on and goes on
   * live (counted in `stats.journalCuts`); "fail" throws `JournalDivergenceError`.
   * @default "cut" */
  divergence?: "cut" | "fail";
  /** How the journal names a model call's request, to ignore what your stack stamps on it
   * per run (ids, times) beyond what breakwater drops itself (`RUN_STAMPS`). Handed a copy
   * of the request; returns what names it. @default the request as it is */
  requestKey?: RequestKey;
}

const INF = Number.POSITIVE_INFINITY;
/** Who runs a run by default: this process. */
const PROCESS_OWNER = `process-${globalThis.crypto.randomUUID()}`;
/** Runs holding a journal's lease in this process. A clean exit lets go of them all, so
 * the same run started again goes on at once (a crash leaves them to expire): a journal
 * that releases synchronously (SQLite) as the process exits, one that needs I/O
 * (Postgres) when the event loop runs dry. */
const held = new Set<Run>();
let exitHooked = false;
function holding(run: Run): void {
  held.add(run);
  if (exitHooked) return;
  exitHooked = true;
  process.on("beforeExit", () => {
    for (const r of [...held]) r.releaseSync();
  });
  process.on("exit", () => {
    for (const r of [...held]) r.releaseSync();
  });
}

/** The parent of the run `child` is building (a constructor has no private parameter). */
let spawning: Run | undefined;
const isJournal = (j: unknown) =>
  typeof (j as Journal)?.get === "function" && typeof (j as Journal)?.put === "function";

const SPEC = {
  id: opt.str(),
  deadlineMs: opt.ms(),
  maxAttempts: opt.int({ min: 1, default: INF, infinite: true }),
  maxTokens: opt.int({ min: 1, default: INF, infinite: true }),
  maxRetryShare: opt.num({ max: 1, default: 1 }),
  maxToolFailures: opt.int({ min: 1, default: INF, infinite: true }),
  callShare: opt.num({ min: 0.01, max: 1, default: 0.8 }),
  clock: opt.clock(),
  journal: opt.any<Journal>(
    isJournal,
    "a Journal (get, put, steps), e.g. new MemoryJournal() or new SqliteJournal(file)",
  ),
  priority: opt.any<number>((x) => Number.isFinite(x), "a finite number"),
  owner: opt.str(),
  leaseMs: opt.ms({ default: 60_000 }),
  divergence: opt.oneOf(["cut", "fail"] as const, "cut"),
  requestKey: opt.fn<RequestKey>(),
} satisfies Record<keyof RunOptions, unknown>;

/**
 * One agent run: a deadline set once at the start, a cap on attempts across all its calls,
 * a token allowance, and a journal of finished steps. Every policy call made with `{ run }`
 * draws on it (docs/architecture.md, rule 6).
 */
export class Run {
  readonly id: string;
  readonly clock: Clock;
  readonly startedAt: number;
  /** Absolute time on `clock`; Infinity when the run has no deadline. */
  readonly deadline: number;
  readonly maxAttempts: number;
  readonly maxTokens: number;
  readonly maxRetryShare: number;
  readonly maxToolFailures: number;
  readonly callShare: number;
  readonly journal: Journal | undefined;
  readonly priority: number;
  /** The run that started this one (see `child`); undefined for a top-level run. */
  readonly parent: Run | undefined;
  /** The top of this run's tree: a rate limiter's fairness and per-run cap count by it. */
  readonly root: Run;
  readonly #limits: RunLimits;
  readonly #owner: string;
  readonly #leaseMs: number;
  /** The claim this run holds on its id in the journal, taken by its first step: the
   * fencing token its writes carry (null: the journal grants leases without one). */
  #claim: Promise<Lease | null> | undefined;
  /** That claim's generation, once granted (what an exiting process lets go of). */
  #generation: number | undefined;
  #children = 0;

  constructor(options: RunOptions = {}) {
    const o = parseOptions(new Validator(spawning ? "Run.child" : "Run"), SPEC, options);
    const parent = spawning;
    spawning = undefined;
    if (parent !== undefined && o.clock !== undefined && o.clock !== parent.clock)
      new Validator("Run.child").fail("clock", o.clock, "the parent's clock (a child shares it)");
    this.parent = parent;
    this.root = parent?.root ?? this;
    // A child's default id is its place in the tree, so a resumed run's children find
    // their own journaled steps again (when started in the same order).
    this.id =
      o.id ?? (parent ? `${parent.id}.${++parent.#children}` : globalThis.crypto.randomUUID());
    this.clock = parent?.clock ?? o.clock ?? systemClock;
    this.startedAt = this.clock.now();
    this.deadline = Math.min(this.startedAt + (o.deadlineMs ?? INF), parent?.deadline ?? INF);
    this.priority = o.priority ?? (parent === undefined ? 0 : parent.priority - 1);
    this.maxAttempts = o.maxAttempts;
    this.maxTokens = o.maxTokens;
    this.maxRetryShare = o.maxRetryShare;
    this.maxToolFailures = o.maxToolFailures;
    this.callShare = o.callShare;
    this.journal = o.journal;
    this.#owner = o.owner ?? PROCESS_OWNER;
    this.#leaseMs = o.leaseMs;
    this.#limits = new RunLimits(this, parent && partsOf(parent)!.limits);
    const journal = o.journal;
    const calls =
      journal &&
      new CallLog(this, {
        runId: this.id,
        journal,
        clock: this.clock,
        limits: this.#limits,
        divergence: o.divergence,
        hold: async () => {
          const lease = await this.#hold(journal);
          if (journal.release) holding(this);
          return lease;
        },
        lost: () => this.#takenOver(journal),
      });
    this.#parts = {
      limits: this.#limits,
      memo: new ToolMemo(this.#limits, this.clock),
      calls,
      requestKey: o.requestKey,
    };
  }

  /** What the policy and the tool guard work with (`partsOf`). */
  readonly #parts: RunParts;

  static {
    readRunParts((x) => (#parts in x ? (x as Run).#parts : undefined));
  }

  /** What the run has counted so far (a copy). */
  get stats(): RunStats {
    return { ...this.#limits.stats };
  }

  /** The ledger of every call made with this run. */
  get ledgers(): readonly Ledger[] {
    return this.#limits.ledgers;
  }

  get usage(): Usage {
    return this.#limits.usage;
  }

  get wasted(): Usage {
    return this.#limits.wasted;
  }

  get billed(): Usage {
    return this.#limits.billed;
  }

  /** What is left of the run's deadline, in ms (0 when it has passed). */
  remainingMs(now = this.clock.now()): number {
    return Math.max(0, this.deadline - now);
  }

  /** The latest a call starting now may end: a safe share of what is left of the run. */
  callDeadline(now = this.clock.now()): number {
    return this.#limits.callDeadline(now);
  }

  /**
   * Runs one step of the run once: with a journal, a step that already succeeded under
   * this run id returns its recorded result without running again, so a run restarted
   * after a failure resumes at the failed step. The result must be JSON.
   */
  async step<T>(name: string, fn: () => T | PromiseLike<T>): Promise<T> {
    if (typeof name !== "string" || name === "")
      new Validator("Run.step").fail("name", name, "a non-empty string");
    const journal = this.journal;
    if (journal === undefined) return fn();
    // Two workers never run one run: the lease is taken (or renewed) before every step.
    const lease = await this.#hold(journal);
    if (journal.release) holding(this);
    const stats = this.#limits.stats;
    const onReplay = () => void stats.stepsReplayed++;
    const lost = () => this.#takenOver(journal);
    // A long step keeps its lease: renewed every third of it while the step runs (wall
    // time, as leases are; the timer never keeps the process alive).
    const renew =
      journal.claim &&
      setInterval(
        () => void Promise.resolve(this.#renew(journal, lease)).catch(() => {}),
        Math.max(10, this.#leaseMs / 3),
      );
    renew?.unref?.();
    try {
      return await runStep(
        { runId: this.id, journal, clock: this.clock, onReplay, lease, lost },
        name,
        () => inStepOf(this, fn), // the calls it makes are the step's
      );
    } finally {
      clearInterval(renew);
    }
  }

  /** Takes the run's lease (its first step) or renews it (every later one); throws
   * `RunClaimedError` while another worker holds the run, or once one took it over. */
  async #hold(journal: Journal): Promise<Lease | undefined> {
    if (!journal.claim) return undefined;
    if (this.#claim === undefined) {
      const claiming = (async () => {
        const got = await journal.claim!(this.id, this.#owner, this.#leaseMs);
        if (got === false) throw new RunClaimedError(this.id, await journal.holder?.(this.id));
        if (typeof got !== "number") return null;
        this.#generation = got;
        return { owner: this.#owner, generation: got };
      })();
      this.#claim = claiming;
      // Steps started together wait for the one claim; a refused claim is tried afresh by
      // the next step (the lease may have run out by then).
      claiming.catch(() => {
        if (this.#claim === claiming) this.#claim = undefined;
      });
      return (await claiming) ?? undefined;
    }
    const lease = (await this.#claim) ?? undefined;
    if (!(await this.#renew(journal, lease))) throw await this.#takenOver(journal);
    return lease;
  }

  /** What a worker that lost its run is told: who holds it now, where the journal says. */
  async #takenOver(journal: Journal): Promise<RunClaimedError> {
    const holder = await Promise.resolve()
      .then(() => journal.holder?.(this.id))
      .catch(() => undefined);
    return new RunClaimedError(this.id, holder, Date.now(), true);
  }

  /** Renews the lease; false when it was taken over. */
  async #renew(journal: Journal, lease: Lease | undefined): Promise<boolean> {
    const got = await journal.claim!(this.id, this.#owner, this.#leaseMs, lease?.generation);
    return got !== false;
  }

  /**
   * A run started by this one (a subagent, a parallel tool): its own caps, within this
   * run's deadline, on its clock; every call and attempt it makes also counts here, so the
   * parent's caps hold over the whole tree. Its calls share the tree's per-run cap in a
   * rate limiter and stand behind the parent's (priority: the parent's minus 1).
   */
  child(options: RunOptions = {}): Run {
    spawning = this;
    try {
      return new Run(options);
    } finally {
      spawning = undefined;
    }
  }

  /** Lets go of the journal's lease on this run (when it is done, or handed over). */
  async release(): Promise<void> {
    held.delete(this);
    await this.#claim?.catch(() => null); // a claim in flight, then let go of it
    const generation = this.#generation;
    this.#claim = this.#generation = undefined;
    await this.journal?.release?.(this.id, this.#owner, generation);
  }

  /** Lets go of the lease without waiting: what the process does as it exits (only the
   * claim this run took, never a later one under the same owner). */
  releaseSync(): void {
    held.delete(this);
    const generation = this.#generation;
    this.#claim = this.#generation = undefined;
    try {
      const r = this.journal?.release?.(this.id, this.#owner, generation);
      if (r instanceof Promise) r.catch(() => {});
    } catch {}
  }

  /** The run as plain data: id, deadline, stats and billed tokens. */
  toJSON() {
    return {
      id: this.id,
      startedAt: this.startedAt,
      stats: this.stats,
      usage: this.usage,
      wasted: this.wasted,
      billed: this.billed,
    };
  }
}
