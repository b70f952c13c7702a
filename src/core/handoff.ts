import { type GiveUpReason, reasonOf, waitOf } from "./errors.ts";

/**
 * What a durable engine does with a call breakwater ended inside one of its steps
 * (docs/architecture.md, rule 22): wait `waitMs` in its own timer and run the step again,
 * or end the step for good (`waitMs` undefined): the engine never retries what breakwater
 * would not, so the two layers never multiply.
 */
export interface Handoff {
  readonly reason: GiveUpReason | undefined;
  /** Set when the engine waits and calls again. */
  readonly waitMs?: number;
}

/** The give-ups that name a wait the upstream (or breakwater's own gate) asked for. */
const WAITS: ReadonlySet<GiveUpReason> = new Set(["deferred", "rate-limit-wait", "circuit-open"]);

/**
 * The engine's verdict on `error`, thrown by a policy at `now`: a wait when breakwater
 * ended the call only to have the wait performed elsewhere (`deferred`), or a gate named
 * how long it would hold (a 429's hold, an open breaker's cool-off), within `maxWaitMs`
 * (the policy's Retry-After cap: past it the upstream is shedding load, a fallback or the
 * caller decides) and before `deadlineAt`. Everything else is final: a permanent failure,
 * attempts or admission spent, the deadline, a stream that showed output, a cancellation.
 */
export function handoff(
  error: unknown,
  now: number,
  deadlineAt: number,
  maxWaitMs: number,
): Handoff {
  const reason = reasonOf(error);
  const waitMs = waitOf(error); // also through an SDK's class that wraps it
  if (
    reason !== undefined &&
    WAITS.has(reason) &&
    waitMs !== undefined &&
    waitMs <= maxWaitMs &&
    now + waitMs < deadlineAt
  )
    return { reason, waitMs };
  return { reason };
}
