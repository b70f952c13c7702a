import { type Clock, systemClock } from "../core/clock.ts";
import type { Ledger } from "../core/ledger.ts";
import type { Usage } from "../core/usage.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import { registerRun } from "./internal.ts";
import type { Journal } from "./journal.ts";
import { RunLimits, type RunStats } from "./limits.ts";
import { runStep } from "./steps.ts";
import { ToolMemo } from "./tool-memo.ts";

export type { RunStats } from "./limits.ts";

/** Options of a `Run`. */
export interface RunOptions {
  /** Identifies the run in idempotency keys and journals. @default a random UUID */
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
}

const INF = Number.POSITIVE_INFINITY;
const isClock = (c: unknown) =>
  typeof (c as Clock)?.now === "function" && typeof (c as Clock)?.schedule === "function";
const isJournal = (j: unknown) =>
  typeof (j as Journal)?.get === "function" && typeof (j as Journal)?.put === "function";

const SPEC = {
  id: opt.str(),
  deadlineMs: opt.ms(),
  maxAttempts: opt.int(1, INF, true),
  maxTokens: opt.int(1, INF, true),
  maxRetryShare: opt.num(0, 1, 1),
  maxToolFailures: opt.int(1, INF, true),
  callShare: opt.num(0.01, 1, 0.8),
  clock: opt.any<Clock>(isClock, "a Clock (now, sleep, schedule)"),
  journal: opt.any<Journal>(
    isJournal,
    "a Journal (get, put, steps), e.g. new MemoryJournal() or new SqliteJournal(file)",
  ),
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
  readonly #limits: RunLimits;

  constructor(options: RunOptions = {}) {
    const o = parseOptions(new Validator("Run"), SPEC, options);
    this.id = o.id ?? globalThis.crypto.randomUUID();
    this.clock = o.clock ?? systemClock;
    this.startedAt = this.clock.now();
    this.deadline = this.startedAt + (o.deadlineMs ?? INF);
    this.maxAttempts = o.maxAttempts;
    this.maxTokens = o.maxTokens;
    this.maxRetryShare = o.maxRetryShare;
    this.maxToolFailures = o.maxToolFailures;
    this.callShare = o.callShare;
    this.journal = o.journal;
    this.#limits = new RunLimits(this);
    registerRun(this, { limits: this.#limits, memo: new ToolMemo(this.#limits, this.clock) });
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
    const stats = this.#limits.stats;
    const onReplay = () => void stats.stepsReplayed++;
    return runStep({ runId: this.id, journal, clock: this.clock, onReplay }, name, fn);
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
