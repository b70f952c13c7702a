import { failureOf, type GiveUpReason, OutputError, reasonOf } from "../core/errors.ts";
import type { Failure, FailureKind } from "../core/failure.ts";
import { isA } from "../core/safe.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import {
  capsOf,
  checkUpstreams,
  type Fallback,
  type Leg,
  type MoveOn,
  Router,
  roomOf,
  type Strategy,
  SWITCH_AFTER_MS,
  SWITCH_KINDS,
  type Upstream,
} from "./router.ts";

export type { ChainCallOptions, Fallback, Upstream } from "./router.ts";

/** Options of a `fallback` chain. */
export interface FallbackOptions {
  /** The chain's deadline in ms, shared by every upstream: set once, when a call starts.
   * @default none (each upstream's own) */
  deadlineMs?: number;
  /** Attempts across the whole chain. @default the sum of the upstreams' caps (for a call
   * with a deadline, their deadline caps) */
  maxAttempts?: number;
  /** How long a call waits at an upstream's rate limiter (its queue, a 429's hold) while
   * the next upstream has room, before it moves on: wait if short, switch if long.
   * @default 1000 (about what a healthy upstream takes to begin an answer) */
  switchAfterMs?: number;
  /** Whether a failure moves the call to the next upstream. @default `movesOn`: the
   * upstream cannot take it now (admission refused, breaker open, a Retry-After past the
   * cap, attempts or time used up on a transient failure, a spent quota) */
  when?: MoveOn;
}

/** Reasons that say "this upstream cannot serve the call now": the next one may. A
 * `deadline` give-up moves on too when the chain still has time: the wait the upstream
 * asked (its Retry-After, or the backoff) would have passed the deadline, and another
 * upstream may answer without one (the router checks the time). */
const MOVE_REASONS: ReadonlySet<GiveUpReason> = new Set([
  "budget",
  "rate-limit-wait",
  "circuit-open",
  "retry-after-too-long",
  "attempts-exhausted",
  "attempt-timeout",
  "deadline",
]);

/**
 * What a chain does after each kind of failure, in one table: retry at the same upstream
 * (within its policy: attempts, admission, the wait if it is short), then move on when it
 * cannot take the call; move on at once (another upstream may answer what this one will
 * not); or stop (the caller's to fix, or the answer's).
 */
export const ON_FAILURE: Readonly<Record<FailureKind, "retry-here" | "move-on" | "stop">> = {
  rate_limited: "retry-here", // a pool moves at once to a deployment with room
  overloaded: "retry-here", // likewise
  server_error: "retry-here",
  timeout: "retry-here",
  transport: "retry-here",
  invalid_output: "retry-here", // an invalid answer may come out right; a refusal moves on
  quota_exhausted: "move-on",
  context_exceeded: "move-on", // to an upstream marked forContextExceeded
  content_filtered: "move-on", // another model may answer it
  truncated: "stop", // the same limit cuts it the same way anywhere
  invalid_request: "stop",
  auth: "stop",
  not_found: "stop",
  cancelled: "stop",
  unknown: "stop",
};

/** Whether an error is the model refusing (an OutputError "refusal"). */
export function isRefusal(error: unknown): boolean {
  for (let e = error, i = 0; e && i < 8; e = (e as { cause?: unknown }).cause, i++)
    if (isA(e, OutputError) && e.problem === "refusal") return true;
  return false;
}

/** The default `when`: the upstream cannot take the call now (`ON_FAILURE`, and the
 * reasons of MOVE_REASONS); a bad request, a refused key, a cancellation or the run's
 * limits stay with the caller. */
export function movesOn(
  failure: Failure | undefined,
  reason: GiveUpReason | undefined,
  error?: unknown,
): boolean {
  if (reason === "cancelled" || reason?.startsWith("run-")) return false;
  if (failure !== undefined && ON_FAILURE[failure.kind] === "stop") return false;
  if (reason !== undefined && MOVE_REASONS.has(reason)) return true;
  if (failure === undefined) return false;
  return ON_FAILURE[failure.kind] !== "stop" || isRefusal(error);
}

/** The options of every chain: the table its validation derives from. */
export const CHAIN_SPEC = {
  deadlineMs: opt.ms(),
  maxAttempts: opt.int({ min: 1, default: Number.POSITIVE_INFINITY, infinite: true }),
  switchAfterMs: opt.num({ min: 0, max: 2_147_483_647, default: SWITCH_AFTER_MS }),
  when: opt.fn<MoveOn>(),
};

/** The chain's order: the first upstream that is not only for context-length failures,
 * then the next of the same kind (a context-length failure goes to the next larger one). */
class Ordered<T, C> implements Strategy<C> {
  readonly #ups: readonly Upstream<T, C>[];
  readonly #when: MoveOn;
  readonly #switchAfterMs: number;

  constructor(ups: readonly Upstream<T, C>[], when: MoveOn, switchAfterMs: number) {
    this.#ups = ups;
    this.#when = when;
    this.#switchAfterMs = switchAfterMs;
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

  /** Retry at the same upstream, but not a refusal (another model may answer), nor a rate
   * limit, an overload or a timeout while the next upstream has room: it takes the call
   * now, without the wait (wait if short, switch if long). */
  retryHere(i: number, f: Failure, error: unknown, leg: Leg<C>): boolean {
    if (ON_FAILURE[f.kind] !== "retry-here" || isRefusal(error)) return false;
    // Not retried here, it ends `not-retryable`: switch only if `when` then moves it on.
    const switches = SWITCH_KINDS.has(f.kind) && this.#when(f, "not-retryable", error);
    return !(switches && this.#onwardHasRoom(i, leg));
  }

  /** A call waits at upstream `i`'s rate limiter no longer than switching would take, while
   * the next upstream has room. */
  maxWaitMs(i: number, leg: Leg<C>): number | undefined {
    return this.#onwardHasRoom(i, leg) ? this.#switchAfterMs : undefined;
  }

  #onwardHasRoom(i: number, leg: Leg<C>): boolean {
    const j = this.next(i, undefined);
    return j >= 0 && !leg.tried.has(j) && roomOf(this.#ups[j]!) > 0;
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
  const strategy = new Ordered(ups, o.when ?? movesOn, o.switchAfterMs);
  return new Router(ups, strategy, { deadlineMs: o.deadlineMs, ...capsOf(ups, o.maxAttempts) }, v);
}
