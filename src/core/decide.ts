import type { Backoff } from "./backoff.ts";
import type { Deadline, TimeoutCause } from "./deadline.ts";
import { provesNothingRan } from "./effects.ts";
import type { GiveUpReason } from "./errors.ts";
import { type Failure, isOutputKind } from "./failure.ts";
import { MAX_DELAY_MS } from "./retry-after.ts";

/** Where a call stands once an attempt has failed. */
export interface RetryState {
  /** Attempts made so far, the failed one included. */
  readonly attempt: number;
  readonly deadline: Deadline;
  /** The last wait (decorrelated jitter grows from it); 0 before the first retry. */
  readonly previousDelayMs: number;
  /** Output reached the consumer and may not be replayed. */
  readonly emitted: boolean;
  /** Set when one of our own timers cut the attempt. */
  readonly timedOutBy: TimeoutCause | undefined;
  /** The caller's `retryIf` refused this retry. */
  readonly callerRefused: boolean;
  /** Why the run refuses another attempt or retry, if it does. */
  readonly runRefusal: GiveUpReason | undefined;
  /** The request changes state on the server each time it arrives (rule 20). */
  readonly unsafe?: boolean;
}

/** The policy's rules that a decision reads. */
export interface RetryRules {
  readonly maxAttempts: number;
  /** The cap after one of our own timers cut the attempt, when it is lower: the upstream
   * is still working on what its client left, so a deadline's budget is not spent on
   * stacking more of it (rule 1). @default maxAttempts */
  readonly cutMaxAttempts?: number;
  readonly backoff: Backoff;
  readonly retryAfterMaxMs: number;
  readonly retryAfterJitterMs: number;
  /** A hint beyond the cap: give up (backpressure) or wait the cap. */
  readonly retryAfterBeyondMax: "give-up" | "wait-max";
  /** [0, 1); drawn once, when a retry's wait is computed. */
  readonly random: () => number;
}

export type Verdict =
  | { readonly retry: true; readonly delayMs: number }
  | { readonly retry: false; readonly reason: GiveUpReason; readonly retryAfterMs?: number };

/** Clients told the same reset time come back spread over [hint, hint + min(hint,
 * `retryAfter.jitterMs`)], not together: a window's reset is a herd's starting gun.
 * Measured in the storm's rate-limit scenario: 20% of the hint leaves 15% of the limit
 * unused to overflow at each reset; the whole hint uses all of it. */
const HINT_SPREAD = 1;

const stop = (reason: GiveUpReason, retryAfterMs?: number): Verdict =>
  retryAfterMs === undefined ? { retry: false, reason } : { retry: false, reason, retryAfterMs };

/** A value drawn outside [0, 1) (or NaN) must not move a wait outside its bounds. */
const unit = (r: number): number => (r >= 0 && r < 1 ? r : 0);
const clampDelay = (ms: number): number => (ms > 0 ? Math.min(ms, MAX_DELAY_MS) : 0); // NaN and negatives: no wait

/** The rules that end a call whatever the wait would be, in the order of rule 1. */
function settled(s: RetryState, f: Failure, r: RetryRules): Verdict | undefined {
  if (f.kind === "cancelled") return stop("cancelled");
  // An answer shown and then found bad was not interrupted: it ended, and is refused.
  if (s.emitted) return stop(isOutputKind(f.kind) ? "not-retryable" : "stream-interrupted");
  // An unsafe request is sent again only when the failure proves it never arrived; one cut
  // by a timer (the deadline's too) may have arrived; an answer that came and failed its
  // checks did (rule 20).
  if (s.unsafe && f.retryable && !provesNothingRan(f))
    return stop(isOutputKind(f.kind) ? "not-retryable" : "outcome-unknown");
  if (s.timedOutBy === "deadline" || s.timedOutBy === "run-deadline") return stop(s.timedOutBy);
  if (!f.retryable || s.callerRefused) return stop("not-retryable");
  const cap = s.timedOutBy === undefined ? r.maxAttempts : (r.cutMaxAttempts ?? r.maxAttempts);
  if (s.attempt >= cap)
    return stop(s.timedOutBy === undefined ? "attempts-exhausted" : "attempt-timeout");
  return undefined;
}

/** The wait before the retry (rule 2): the server's hint plus jitter, never shorter than
 * the hint; else the backoff. */
function waitFor(s: RetryState, f: Failure, r: RetryRules): number {
  const hint = f.retryAfterMs;
  if (hint !== undefined) {
    // The spread never carries a wait past the cap (a 29 s hint under a 30 s cap waits at
    // most 30 s), and never shortens the hint.
    const spread = unit(r.random()) * Math.min(r.retryAfterJitterMs, hint * HINT_SPREAD);
    return Math.max(hint, Math.min(hint + spread, r.retryAfterMaxMs));
  }
  return clampDelay(r.backoff.delay(s.attempt, f.kind, s.previousDelayMs, r.random));
}

/**
 * The retry decision (docs/architecture.md, rules 1, 2 and 6): a pure function of where the
 * call stands, how the attempt failed and the time. It performs nothing: no I/O, no sleep,
 * no throw. The call loop performs the verdict, after asking the shared gates (breaker,
 * admission) and the `onRetry` hook, which hold state and so are not decided here.
 */
export function decide(s: RetryState, f: Failure, now: number, r: RetryRules): Verdict {
  const early = settled(s, f, r);
  if (early !== undefined) return early;
  let hint = f.retryAfterMs;
  if (hint !== undefined && hint > r.retryAfterMaxMs) {
    // A hint beyond the cap is backpressure: give up now, do not sleep it (or, when asked
    // to, wait the cap and try).
    if (r.retryAfterBeyondMax === "give-up") return stop("retry-after-too-long", hint);
    hint = r.retryAfterMaxMs;
  }
  const delayMs = waitFor(s, hint === f.retryAfterMs ? f : { ...f, retryAfterMs: hint }, r);
  if (now + delayMs >= s.deadline.at) return stop(s.deadline.by, hint);
  if (s.runRefusal !== undefined) return stop(s.runRefusal);
  return { retry: true, delayMs };
}
