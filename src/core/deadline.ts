/** Which of our own timers cut an attempt. */
export type TimeoutCause =
  | "attempt"
  | "deadline"
  | "run-deadline"
  | "first-token"
  | "idle"
  | "total";

/** A moment on the policy's clock, and what it stands for. */
export interface Limit<B extends TimeoutCause = TimeoutCause> {
  readonly at: number;
  readonly by: B;
}

/** A call's deadline: its own, or the run's share, whichever comes first. */
export type Deadline = Limit<"deadline" | "run-deadline">;

/** The earliest of `limits`; on a tie, the first given. */
export function earliest<B extends TimeoutCause>(...limits: Limit<B>[]): Limit<B> {
  let best = limits[0]!;
  for (let i = 1; i < limits.length; i++) if (limits[i]!.at < best.at) best = limits[i]!;
  return best;
}

/** Most calls have no deadline: one shared value spares an allocation per call. */
const NO_DEADLINE: Deadline = Object.freeze({ at: Number.POSITIVE_INFINITY, by: "deadline" });

/**
 * The one deadline computation (docs/architecture.md, rule 6): a call started at `now` ends
 * by its own `deadlineMs`, or by the time its run allows it (a safe share of what is left of
 * the run), whichever is first. Computed once, when the call starts; every attempt, wait and
 * stream timer reads this value.
 */
export function callDeadline(now: number, deadlineMs: number, runAllows: number): Deadline {
  const own = now + deadlineMs;
  if (runAllows < own) return { at: runAllows, by: "run-deadline" };
  return own === Number.POSITIVE_INFINITY ? NO_DEADLINE : { at: own, by: "deadline" };
}

/** The time one attempt may take from `now`: its own timeout, or what is left before the
 * call's deadline when that is sooner. */
export function attemptMs(now: number, attemptTimeoutMs: number, deadline: Deadline): number {
  return Math.min(attemptTimeoutMs, deadline.at - now);
}

/** Which limit ends the attempt `attemptMs` measured (a tie is the attempt's own). */
export function attemptCause(
  now: number,
  attemptTimeoutMs: number,
  deadline: Deadline,
): TimeoutCause {
  return attemptTimeoutMs <= deadline.at - now ? "attempt" : deadline.by;
}
