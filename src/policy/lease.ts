import type { Breaker } from "../core/breaker.ts";

export type BreakerVerdict = "onSuccess" | "onFailure" | "onNeutral";

/**
 * One granted attempt's hold on the breaker: released exactly once, whichever way the
 * attempt ends (docs/architecture.md, rule 12). It references the breaker only, never the
 * attempt or its stream, so a stream its consumer abandoned can still be collected and
 * release it.
 */
export class BreakerLease {
  #breaker: Breaker | undefined;

  constructor(breaker: Breaker) {
    this.#breaker = breaker;
  }

  get held(): boolean {
    return this.#breaker !== undefined;
  }

  /** Tells the breaker; returns what a custom breaker threw, for the caller to report. */
  release(verdict: BreakerVerdict): unknown {
    const breaker = this.#breaker;
    if (breaker === undefined) return undefined;
    this.#breaker = undefined;
    try {
      breaker[verdict]();
      return undefined;
    } catch (error) {
      return error ?? new Error(`breaker.${verdict} threw`);
    }
  }
}
