/**
 * The Temporal activity RetryPolicy that goes with breakwater's `activity()`, for workflow
 * code: this module imports nothing but breakwater's pure core, so Temporal's workflow
 * bundle takes it.
 *
 * @example
 * ```ts
 * import { proxyActivities } from "@temporalio/workflow";
 * import { retryPolicy } from "breakwater/temporal/workflow";
 *
 * export async function ask(question: string): Promise<string> {
 *   const { answer } = proxyActivities<{ answer(q: string): Promise<string> }>({
 *     startToCloseTimeout: "2 minutes",
 *     heartbeatTimeout: "30 seconds",
 *     retry: retryPolicy(), // breakwater's defaults: 3 attempts, Retry-After capped at 30 s
 *   });
 *   return answer(question);
 * }
 * ```
 * @module breakwater/temporal/workflow
 */
import { ConfigError } from "../core/config-error.ts";
import { GIVE_UP_REASONS, type GiveUpReason } from "../core/errors.ts";

/** Temporal's RetryPolicy, as `proxyActivities({ retry })` takes it. */
export interface ActivityRetryPolicy {
  readonly maximumAttempts: number;
  readonly initialInterval: number;
  readonly backoffCoefficient: number;
  readonly maximumInterval: number;
  readonly nonRetryableErrorTypes: string[];
}

/** The numbers of breakwater's policy that the activity's RetryPolicy follows (the
 * policy's own options, by the same names). */
export interface RetryPolicyOptions {
  /** The policy's `maxAttempts`. @default 3 */
  maxAttempts?: number;
  /** The policy's `retryAfter`: only `maxMs` is read. @default { maxMs: 30000 } */
  retryAfter?: { maxMs?: number };
}

/** The give-ups that name a wait for the engine: thrown retryable, with their delay. */
const WAITS: readonly GiveUpReason[] = ["deferred", "rate-limit-wait", "circuit-open"];

const OWNER = "retryPolicy";
const isObject = (x: unknown): x is Record<string, unknown> =>
  x !== null && typeof x === "object" && !Array.isArray(x);

/** The two numbers read, checked by name (by hand: the workflow bundle takes no more). */
function read(options: unknown): { maxAttempts: number; maxMs: number } {
  if (options === undefined) return { maxAttempts: 3, maxMs: 30_000 };
  if (!isObject(options)) throw new ConfigError(OWNER, "options", options, "an object");
  for (const key of Object.keys(options))
    if (key !== "maxAttempts" && key !== "retryAfter")
      throw new ConfigError(
        OWNER,
        key,
        options[key],
        "not given: it knows maxAttempts, retryAfter",
      );
  const { maxAttempts = 3, retryAfter = {} } = options;
  if (typeof maxAttempts !== "number" || !Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new ConfigError(OWNER, "maxAttempts", maxAttempts, "an integer >= 1");
  if (!isObject(retryAfter)) throw new ConfigError(OWNER, "retryAfter", retryAfter, "{ maxMs }");
  const { maxMs = 30_000 } = retryAfter;
  if (typeof maxMs !== "number" || !Number.isFinite(maxMs) || maxMs < 0)
    throw new ConfigError(OWNER, "retryAfter.maxMs", maxMs, "a finite number >= 0");
  return { maxAttempts, maxMs };
}

/**
 * The activity's RetryPolicy, derived from breakwater's (docs/architecture.md, rule 22):
 * every retry Temporal makes follows a wait breakwater chose (its `nextRetryDelay` set on
 * the failure), or a worker lost mid-attempt; so no more engine attempts than breakwater's
 * `maxAttempts` (an activity sends at most what is left of them), the interval's cap the
 * Retry-After cap, and every final reason listed as non-retryable (each is also thrown
 * non-retryable). Temporal's default is unlimited attempts, which retries a 400 forever.
 */
export function retryPolicy(options?: RetryPolicyOptions): ActivityRetryPolicy {
  const o = read(options);
  return {
    maximumAttempts: o.maxAttempts,
    initialInterval: 1_000,
    backoffCoefficient: 2,
    maximumInterval: Math.max(1_000, o.maxMs),
    nonRetryableErrorTypes: GIVE_UP_REASONS.filter((r) => !WAITS.includes(r)),
  };
}
