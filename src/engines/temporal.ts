/**
 * Temporal: breakwater as the one retry layer inside an activity. `activity(fn)` runs the
 * activity's body under breakwater's policy: short waits are slept in the activity, a
 * longer one (a Retry-After of 20 s, an open breaker's cool-off) ends the attempt with an
 * `ApplicationFailure` whose `nextRetryDelay` is the wait (Temporal's own timer, nothing
 * held), and a final failure is `nonRetryable`, so Temporal retries none of what breakwater
 * would not. Its RetryPolicy comes from breakwater's (`retryPolicy()`, also importable in
 * workflow code from `breakwater/temporal/workflow`).
 *
 * @example
 * ```ts
 * import OpenAI from "openai";
 * import { policy } from "breakwater";
 * import { withBreakwater } from "breakwater/openai";
 * import { activity } from "breakwater/temporal";
 *
 * const p = policy();
 * const openai = withBreakwater(new OpenAI(), { policy: p });
 * // The worker registers it as usual: Worker.create({ activities: { answer }, ... }).
 * export const answer = activity(async ({ signal }, question: string) => {
 *   const r = await openai.chat.completions.create(
 *     { model: "gpt-4o-mini", messages: [{ role: "user", content: question }] },
 *     { signal },
 *   );
 *   return r.choices[0]?.message.content ?? "";
 * }, { policy: p });
 * ```
 * @module breakwater/temporal
 */
import { Context } from "@temporalio/activity";
import { ApplicationFailure } from "@temporalio/common";
import { ConfigError, reasonOf, type StepContext, type StepState } from "../index.ts";
import { markLayer } from "../internal.ts";
import {
  finalWords,
  type Leg,
  leg,
  type Resolved,
  resolveStep,
  type StepOptions,
  type StepTarget,
} from "./step.ts";

export type { StepContext } from "../index.ts";
export type { StepOperation, StepOptions, StepTarget } from "./step.ts";
export {
  type ActivityRetryPolicy,
  type RetryPolicyOptions,
  retryPolicy,
} from "./temporal-retry.ts";

type Info = Context["info"];

/** Where the step stands as this attempt begins: what the last attempt heartbeated, and
 * no fewer attempts spent than Temporal's own count says (a worker that died mid-attempt
 * could not say what it sent). */
function priorState(info: Info): StepState | undefined {
  const said = (info.heartbeatDetails as { breakwater?: StepState } | undefined)?.breakwater;
  const floor = info.attempt - 1;
  if (said !== undefined && typeof said.spent === "number")
    return said.spent >= floor ? said : { ...said, spent: floor };
  if (floor < 1) return undefined;
  return { spent: floor, deadlineAt: null, legs: floor, waitMs: 0, why: "backoff" };
}

/** Heartbeats the step's state while the attempt runs (a stream's reading included), so a
 * lost worker is noticed by the heartbeat timeout and a cancellation reaches it. */
function heartbeating(ctx: Context, state: StepState | undefined): () => void {
  const timeout = ctx.info.heartbeatTimeoutMs;
  const every = timeout !== undefined && timeout > 0 ? Math.max(100, timeout / 3) : 10_000;
  const beat = () => ctx.heartbeat(state === undefined ? undefined : { breakwater: state });
  beat();
  const timer = setInterval(beat, every);
  timer.unref();
  return () => clearInterval(timer);
}

/** A final failure as Temporal records it: non-retryable, typed by breakwater's reason. A
 * cancellation goes back as it came (Temporal's own). */
function final(error: unknown): unknown {
  const reason = reasonOf(error);
  if (reason === "cancelled" || error instanceof ApplicationFailure) return error;
  return ApplicationFailure.create({
    type: reason ?? "failed",
    message: finalWords(error),
    nonRetryable: true,
    ...(error instanceof Error && { cause: error }),
  });
}

/**
 * Runs `target` (an operation under breakwater's policy, or a `fallback` / `pool` chain)
 * as the body of the activity that calls it (docs/architecture.md, rule 22). The
 * operation gets the attempt's context (its signal also ends at the activity's
 * cancellation) and the step's `idempotencyKey` (the workflow and the activity's id: the
 * same across Temporal's retries and replays; `runId` for `guardTool`). The step's
 * attempts and deadline are heartbeated, so the next attempt goes on from them; a wait
 * longer than `holdMs` ends the attempt with its `nextRetryDelay`, a final failure with a
 * non-retryable `ApplicationFailure` typed by breakwater's reason.
 */
export async function step<T>(target: StepTarget<T>, options?: StepOptions): Promise<T> {
  return stepWith(resolveStep("breakwater/temporal step", target, options), target);
}

/** `step`, its options read. */
async function stepWith<T>(r: Resolved, target: StepTarget<T>): Promise<T> {
  const ctx = Context.current();
  const info = ctx.info;
  const key = `${info.workflowExecution?.workflowId ?? info.activityType}:${info.activityId}`;
  const state = priorState(info);
  const stop = heartbeating(ctx, state);
  let out: Leg<T>;
  try {
    out = await leg(r, target, key, state, ctx.cancellationSignal);
  } catch (error) {
    throw final(error);
  } finally {
    stop();
  }
  if (out.ok) return out.value;
  ctx.heartbeat({ breakwater: out.state });
  throw ApplicationFailure.create({
    type: out.reason,
    message: `breakwater: the next attempt waits ${out.waitMs} ms (${out.reason})`,
    nextRetryDelay: out.waitMs,
    details: [out.state],
  });
}

/** An activity whose body is `operation`, run by `step`: the operation gets the step's
 * context, then the activity's arguments. */
export function activity<A extends unknown[], T>(
  operation: (context: StepContext, ...args: A) => T | PromiseLike<T>,
  options?: StepOptions,
): (...args: A) => Promise<T> {
  if (typeof operation !== "function")
    throw new ConfigError("breakwater/temporal activity", "operation", operation, "a function");
  const r = resolveStep("breakwater/temporal activity", operation as never, options);
  const run = (...args: A) => stepWith(r, (c) => operation(c, ...args));
  // `audit({ temporal: { activity } })` reads breakwater's layer off it.
  return markLayer(run, { owner: "temporal", attempts: r.policy.options.maxAttempts });
}
