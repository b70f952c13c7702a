import type { Failure } from "./failure.ts";
import { opt, parseOptions } from "./validate.ts";

/**
 * Decides whether one more retry may go to an upstream now (docs/architecture.md, rule 5).
 * Share one per upstream (provider × model × key). The policy asks `tryAcquire` before each
 * retry (never before a first attempt) and reports every attempt's outcome. Answers are
 * synchronous: an implementation backed by a shared store keeps a local lease of tokens
 * and syncs in the background, so the success path never waits on the network.
 */
export interface Admission {
  /** A retry asks to go, after `failure`. True admits it (and counts it as spent); false
   * refuses it. `ask` says what the call's run has paid for: when some retries must be
   * refused, those of runs that have paid for nothing go first (rule 23). */
  tryAcquire(failure?: Failure, ask?: AdmissionAsk): boolean;
  /** An attempt (first or retry) succeeded; `at` is when it started, on the policy's clock
   * (so the success path reads no clock of its own). */
  onSuccess(at?: number): void;
  /** An attempt failed; `failure` says how (overload signals drive adaptive admission). */
  onFailure?(failure: Failure, at?: number): void;
  /** Gives back a retry that was admitted but not sent (an `onRetry` veto). */
  refund?(): void;
  /** The share of retries it would refuse now, 0 to 1. Optional: a hedge goes only while
   * it is 0 (nothing shows the upstream overloaded); without it, a hedge never stands down
   * for the admission. */
  readonly rejectProbability?: number;
}

/** What a retry asking the admission is part of (rule 23). */
export interface AdmissionAsk {
  /** The call's run has had a call answered already (a turn under way); false for the
   * calls of a run that has paid for nothing yet. A call with no run counts as started. */
  readonly started: boolean;
}

/** Options of a `RetryBudget` (a token bucket for retries). */
export interface RetryBudgetOptions {
  /** Burst allowance: the bucket starts full. @default 10 */
  maxTokens?: number;
  /** Deposited per success: the steady-state share of extra load. @default 0.1 */
  tokenRatio?: number;
}

/** Tokens are kept in integer thousandths (gRPC allows three decimals), so ten 0.1
 * deposits make exactly one token, never 0.9999999999999999. */
const MILLI = 1000;

const SPEC = {
  maxTokens: opt.num({ min: 1, max: 1_000_000, default: 10 }),
  tokenRatio: opt.num({ min: 0.001, max: 1_000_000, default: 0.1 }),
} satisfies Record<keyof RetryBudgetOptions, unknown>;

/**
 * A retry budget, the token bucket of gRPC's retry throttling: a success deposits
 * `tokenRatio`, a retry withdraws 1, an empty bucket refuses at once. 0 ≤ tokens ≤ max.
 */
export class RetryBudget implements Admission {
  readonly maxTokens: number;
  readonly tokenRatio: number;
  #milli: number;
  readonly #maxMilli: number;
  readonly #ratioMilli: number;
  #refused = 0;
  #granted = 0;

  constructor(options: RetryBudgetOptions = {}) {
    const o = parseOptions("RetryBudget", SPEC, options);
    this.maxTokens = o.maxTokens;
    this.tokenRatio = o.tokenRatio;
    this.#maxMilli = Math.round(this.maxTokens * MILLI);
    this.#ratioMilli = Math.round(this.tokenRatio * MILLI);
    this.#milli = this.#maxMilli;
  }

  get tokens(): number {
    return this.#milli / MILLI;
  }

  /** Retries granted and refused so far: what "budget exhausted" alerts read. */
  get stats(): { granted: number; refused: number } {
    return { granted: this.#granted, refused: this.#refused };
  }

  /** Takes one token for a retry; false (and nothing taken) when fewer than one is left. */
  tryAcquire(): boolean {
    if (this.#milli < MILLI) {
      this.#refused++;
      return false;
    }
    this.#milli -= MILLI;
    this.#granted++;
    return true;
  }

  refund(): void {
    this.#milli = Math.min(this.#maxMilli, this.#milli + MILLI);
  }

  onSuccess(): void {
    this.#milli = Math.min(this.#maxMilli, this.#milli + this.#ratioMilli);
  }

  /** The bucket's level, to save and restore (`new RetryBudget(o).restore(saved)`). */
  toJSON(): { tokens: number } {
    return { tokens: this.tokens };
  }

  /** Sets the level from a saved `toJSON()`, clamped to [0, maxTokens]. */
  restore(saved: { tokens: number }): this {
    const t = saved?.tokens;
    if (typeof t === "number" && Number.isFinite(t))
      this.#milli = Math.min(this.#maxMilli, Math.max(0, Math.round(t * MILLI)));
    return this;
  }
}

/** True for anything that implements Admission (duck-typed: a custom or shared budget). */
export const isAdmission = (x: unknown): x is Admission =>
  x !== null &&
  typeof x === "object" &&
  typeof (x as Admission).tryAcquire === "function" &&
  typeof (x as Admission).onSuccess === "function";
