import { validator } from "./validate.ts";

export interface RetryBudgetOptions {
  /** Burst allowance: the bucket starts full. Default 10. */
  maxTokens?: number;
  /** Deposited per success: the steady-state share of extra load. Default 0.1. */
  tokenRatio?: number;
}

/** Tokens are kept in integer thousandths (gRPC allows three decimals), so ten 0.1
 * deposits make exactly one token, never 0.9999999999999999. */
const MILLI = 1000;

/**
 * A retry budget (DESIGN rule 5), a token bucket shared per upstream: a success deposits
 * `tokenRatio`, a retry withdraws 1, an empty bucket refuses at once. 0 ≤ tokens ≤ max.
 */
export class RetryBudget {
  readonly maxTokens: number;
  readonly tokenRatio: number;
  #milli: number;
  readonly #maxMilli: number;
  readonly #ratioMilli: number;
  #refused = 0;
  #granted = 0;

  constructor(options: RetryBudgetOptions = {}) {
    const v = validator("RetryBudget");
    v.known("", options as Record<string, unknown>, ["maxTokens", "tokenRatio"]);
    this.maxTokens = v.num("maxTokens", options.maxTokens ?? 10, 1, 1_000_000);
    this.tokenRatio = v.num("tokenRatio", options.tokenRatio ?? 0.1, 0.001, 1_000_000);
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

  /** Gives back a token taken for a retry that did not happen (an onRetry veto). */
  refund(): void {
    this.#milli = Math.min(this.#maxMilli, this.#milli + MILLI);
  }

  onSuccess(): void {
    this.#milli = Math.min(this.#maxMilli, this.#milli + this.#ratioMilli);
  }
}
