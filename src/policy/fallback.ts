import { failureOf, type GiveUpReason, reasonOf } from "../core/errors.ts";
import type { Failure, FailureKind } from "../core/failure.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import {
  checkUpstreams,
  type Fallback,
  type MoveOn,
  Router,
  type Strategy,
  type Upstream,
} from "./router.ts";

export type { ChainCallOptions, Fallback, Upstream } from "./router.ts";

/** Options of a `fallback` chain. */
export interface FallbackOptions {
  /** The chain's deadline in ms, shared by every upstream: set once, when a call starts.
   * @default none (each upstream's own) */
  deadlineMs?: number;
  /** Attempts across the whole chain. @default the sum of the upstreams' maxAttempts */
  maxAttempts?: number;
  /** Whether a failure moves the call to the next upstream. @default `movesOn`: the
   * upstream cannot take it now (admission refused, breaker open, a Retry-After past the
   * cap, attempts or time used up on a transient failure, a spent quota) */
  when?: MoveOn;
}

/** Reasons that say "this upstream cannot serve the call now": the next one may. */
const MOVE_REASONS: ReadonlySet<GiveUpReason> = new Set([
  "budget",
  "rate-limit-wait",
  "circuit-open",
  "retry-after-too-long",
  "attempts-exhausted",
  "attempt-timeout",
]);
/** Failures a give-up for another reason still moves on from (a spent quota, an
 * overloaded upstream that said not to retry). */
const MOVE_KINDS: ReadonlySet<FailureKind> = new Set([
  "quota_exhausted",
  "rate_limited",
  "overloaded",
  "server_error",
  "timeout",
  "transport",
]);

/** The default `when`: the upstream cannot take the call now; a bad request, a refused
 * key, a cancellation or a deadline stay with the caller. */
export function movesOn(failure: Failure | undefined, reason: GiveUpReason | undefined): boolean {
  if (reason === "cancelled" || reason === "deadline" || reason?.startsWith("run-")) return false;
  if (reason !== undefined && MOVE_REASONS.has(reason)) return true;
  return failure !== undefined && MOVE_KINDS.has(failure.kind);
}

/** The options of every chain: the table its validation derives from. */
export const CHAIN_SPEC = {
  deadlineMs: opt.ms(),
  maxAttempts: opt.int({ min: 1, default: Number.POSITIVE_INFINITY, infinite: true }),
  when: opt.fn<MoveOn>(),
};

/** The chain's order: the first upstream that is not only for context-length failures,
 * then the next of the same kind (a context-length failure goes to the next larger one). */
class Ordered<T, C> implements Strategy<C> {
  readonly #ups: readonly Upstream<T, C>[];
  readonly #when: MoveOn;

  constructor(ups: readonly Upstream<T, C>[], when: MoveOn) {
    this.#ups = ups;
    this.#when = when;
  }

  first(): number {
    return Math.max(
      0,
      this.#ups.findIndex((u) => !u.forContextExceeded),
    );
  }

  moves(_i: number, error: unknown): boolean {
    const f = failureOf(error);
    return f?.kind === "context_exceeded" || this.#when(f, reasonOf(error), error);
  }

  next(i: number, failure: Failure | undefined): number {
    const wide = failure?.kind === "context_exceeded";
    for (let j = i + 1; j < this.#ups.length; j++)
      if (Boolean(this.#ups[j]!.forContextExceeded) === wide) return j;
    return -1;
  }
}

/**
 * Moves a call to the next upstream (another model, region or provider) when the one it
 * is on cannot take it now (docs/architecture.md, rule 5): under one deadline, one attempt
 * cap and one ledger for the whole chain, the run's limits, and never after a stream showed
 * anything. Each upstream keeps its own policy, so its admission and breaker are its own:
 * a refused retry at the primary becomes the fallback's first attempt, not a failed call.
 */
export function fallback<T, C = unknown>(
  upstreams: readonly Upstream<T, C>[],
  options: FallbackOptions = {},
): Fallback<T, C> {
  const v = new Validator("fallback");
  const ups = checkUpstreams(v, upstreams) as readonly Upstream<T, C>[];
  const o = parseOptions(v, CHAIN_SPEC, options);
  const all = ups.reduce((n, u) => n + u.policy.options.maxAttempts, 0);
  const maxAttempts = o.maxAttempts === Number.POSITIVE_INFINITY ? all : o.maxAttempts;
  const strategy = new Ordered(ups, o.when ?? movesOn);
  return new Router(ups, strategy, { deadlineMs: o.deadlineMs, maxAttempts }, v);
}
