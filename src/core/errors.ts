import type { Failure } from "./failure.ts";
import type { Ledger } from "./ledger.ts";
import type { Usage } from "./usage.ts";

/** Why a call ended without a value. The first group are BreakwaterError reasons (the
 * policy stopped a call that might otherwise have been retried); the second are set on
 * the provider's own error, which is thrown as it is (DESIGN rule 8). */
export type GiveUpReason =
  | "deadline"
  | "budget"
  | "retry-after-too-long"
  | "circuit-open"
  | "stream-interrupted"
  | "attempt-timeout"
  | "run-attempts"
  | "run-deadline"
  | "run-tokens"
  | "run-retry-share"
  | "run-tool-failures"
  | "not-retryable"
  | "attempts-exhausted"
  | "cancelled"
  | "vetoed";

export interface PartialResult<T = unknown> {
  /** Chunks the consumer already received. */
  readonly chunks: readonly T[];
  readonly usage: Usage | undefined;
}

export interface BreakwaterErrorInit {
  cause?: unknown;
  ledger?: Ledger;
  failure?: Failure;
  retryAfterMs?: number;
  partial?: PartialResult;
}

const MESSAGES: Partial<Record<GiveUpReason, string>> = {
  deadline: "the call's deadline leaves no time for another attempt",
  budget: "the retry budget is empty: retries are refused to protect the upstream",
  "retry-after-too-long": "the server asked to wait longer than allowed (backpressure)",
  "circuit-open": "the circuit breaker is open: failing fast",
  "stream-interrupted": "the stream failed after output reached the consumer; not replayed",
  "run-attempts": "the run has used all its attempts",
  "run-deadline": "the run's deadline has passed",
  "run-tokens": "the run has spent its token allowance",
  "run-retry-share": "retries have spent more than their share of the run's tokens",
  "run-tool-failures": "the run hit its cap on tool failures",
};

/** An error breakwater raised itself: the policy stopped the call. */
export class BreakwaterError extends Error {
  override name = "BreakwaterError";
  readonly reason: GiveUpReason;
  readonly ledger: Ledger | undefined;
  readonly failure: Failure | undefined;
  /** The server's hint, when backpressure was why we stopped. */
  readonly retryAfterMs: number | undefined;
  /** What a stream delivered before it broke. */
  readonly partial: PartialResult | undefined;

  constructor(reason: GiveUpReason, init: BreakwaterErrorInit = {}, message?: string) {
    const text = message ?? MESSAGES[reason] ?? reason;
    super(
      `${text}${init.retryAfterMs === undefined ? "" : ` (retry after ${init.retryAfterMs} ms)`}`,
      {
        cause: init.cause,
      },
    );
    this.reason = reason;
    this.ledger = init.ledger;
    this.failure = init.failure;
    this.retryAfterMs = init.retryAfterMs;
    this.partial = init.partial;
  }
}

export const isBreakwaterError = (e: unknown): e is BreakwaterError => e instanceof BreakwaterError;

interface Outcome {
  reason: GiveUpReason;
  ledger: Ledger;
  failure: Failure | undefined;
}
const outcomes = new WeakMap<object, Outcome>();

/** Attaches the give-up reason and ledger to a foreign error the policy rethrows as it is. */
export function tagError(
  error: unknown,
  reason: GiveUpReason,
  ledger: Ledger,
  failure?: Failure,
): void {
  if (error !== null && (typeof error === "object" || typeof error === "function")) {
    outcomes.set(error, { reason, ledger, failure });
  }
}

/** The ledger of the call that threw `error` (a BreakwaterError or a provider's own). */
export function ledgerOf(error: unknown): Ledger | undefined {
  if (error instanceof BreakwaterError && error.ledger) return error.ledger;
  return error !== null && typeof error === "object" ? outcomes.get(error)?.ledger : undefined;
}

/** Why the policy gave up on the call that threw `error`. */
export function reasonOf(error: unknown): GiveUpReason | undefined {
  if (error instanceof BreakwaterError) return error.reason;
  return error !== null && typeof error === "object" ? outcomes.get(error)?.reason : undefined;
}

/** The failure classification of the last attempt of the call that threw `error`. */
export function failureOf(error: unknown): Failure | undefined {
  if (error instanceof BreakwaterError) return error.failure;
  return error !== null && typeof error === "object" ? outcomes.get(error)?.failure : undefined;
}
