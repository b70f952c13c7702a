import type { Clock } from "../../index.ts";
import { header, isTimeout, type PeerLayer, runLayers, sdkRetryable, statusOf } from "./layers.ts";

/*
 * LiteLLM's Router (Python), read at BerriAI/litellm 8039c50 (v1.80.9); R = litellm/
 * router.py, CH = router_utils/cooldown_handlers.py, U = litellm/utils.py, K =
 * litellm/constants.py. Its defaults: num_retries 2, so 3 attempts per model group (R:464-
 * 469, openai's DEFAULT_MAX_RETRIES); the provider SDK under it retries nothing
 * (max_retries 0, R:528); a 6000 s request timeout (K:276); cooldowns of 5 s (K:41).
 */

/** The wait's constants (K:221-223) and the failure rule's (K:35, K:54). */
const INITIAL_S = 0.5;
const MAX_S = 8;
const JITTER_S = 0.75;
const WINDOW_MS = 60_000;
const ALL_FAILED_MIN = 1_000;
const COOLDOWN_S = 5;

/** `_get_retry_after_from_exception_header` (U:5899-5930): `int(Retry-After)`, else an
 * HTTP-date, else -1; `retry-after-ms` is not read. */
function retryAfterS(e: unknown, now: number): number {
  const ra = header(e, "retry-after");
  if (ra === undefined) return -1;
  if (/^\s*[+-]?\d+\s*$/.test(ra)) return Number.parseInt(ra, 10);
  const date = Date.parse(ra);
  return Number.isNaN(date) ? -1 : Math.trunc((date - now) / 1000);
}

/** `_calculate_retry_after` (U:5933-5956), in ms: a Retry-After within (0, 60] s plus
 * U(0, 0.75 s), else min(0.5 s·2^n, 8 s) plus the same jitter. Always read off the
 * group's first error (R:4441, :4479-4480). */
function waitMs(e0: unknown, n: number, random: () => number, now: number): number {
  const ra = retryAfterS(e0, now);
  const jitter = JITTER_S * random();
  if (ra > 0 && ra <= 60) return (ra + jitter) * 1000;
  return (Math.min(INITIAL_S * 2 ** n, MAX_S) + jitter) * 1000;
}

/** What the Router raises, with no request sent, when every deployment of a group is
 * cooling down ("No deployments available", R:7519-7525). */
export class RouterRateLimitError extends Error {
  override name = "RouterRateLimitError";
  readonly status = 429;
}

/** A count that lives for 60 s from its first event (router_utils/
 * track_deployment_metrics.py:22-52; the in-memory cache never extends a live TTL). */
class MinuteCount {
  n = 0;
  #until = Number.NEGATIVE_INFINITY;
  at(now: number): number {
    return now < this.#until ? this.n : 0;
  }
  add(now: number): void {
    if (now >= this.#until) {
      this.n = 0;
      this.#until = now + WINDOW_MS;
    }
    this.n++;
  }
}

/**
 * One deployment, the only one of its model group: its minute's failures and successes
 * and its cooldown, shared by every call the router sends it. A failure counts first, then
 * the cooldown rule runs (CH:39-317): a status must be one that cools (429, 401, 404, 408
 * or >= 500; a timeout is a 408); a single-deployment group cools down only when every
 * request of the minute failed and there were at least 1 000, or for a status the Router
 * would not retry (CH:194-246), for the Retry-After (>= 0) or 5 s. A cooling deployment is
 * never extended (cooldown_cache.py:69-98).
 */
export class LiteLLMDeployment {
  readonly #fails = new MinuteCount();
  readonly #successes = new MinuteCount();
  #coolUntil = Number.NEGATIVE_INFINITY;

  cooling(now: number): boolean {
    return now < this.#coolUntil;
  }

  succeeded(now: number): void {
    this.#successes.add(now);
  }

  failed(e: unknown, now: number): void {
    this.#fails.add(now);
    const status = statusOf(e) ?? (isTimeout(e) ? 408 : undefined);
    if (status === undefined || this.cooling(now)) return;
    const cools = status >= 500 || [401, 404, 408, 429].includes(status);
    if (!cools) return;
    const fails = this.#fails.at(now);
    const total = fails + this.#successes.at(now);
    const ra = retryAfterS(e, now);
    const seconds = ra >= 0 ? ra : COOLDOWN_S;
    const allFailed = fails === total && total >= ALL_FAILED_MIN;
    if (seconds > 0 && (allFailed || !sdkRetryable(status))) this.#coolUntil = now + seconds * 1000;
  }
}

/** What the Router's model group calls: the simulation's clock and random, and the app's
 * per-attempt timeout when the scenario sets one. */
export interface RouterContext {
  readonly clock: Clock;
  readonly random: () => number;
  readonly timeoutMs?: number | undefined;
}

/** One request, under the request timeout; the caller's cancellation reaches it (an
 * asyncio cancel ends the call and every retry, R's handlers catch only `Exception`). */
const REQUEST: PeerLayer = {
  name: "litellm request",
  maxAttempts: 1,
  timeoutMs: 6_000_000,
  cancels: true,
  next: () => undefined,
};

async function attempt<T>(
  d: LiteLLMDeployment,
  ctx: RouterContext,
  signal: AbortSignal | undefined,
  send: (s: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  if (d.cooling(ctx.clock.now())) throw new RouterRateLimitError("No deployments available");
  try {
    const value = await runLayers([REQUEST], ctx, signal, send);
    d.succeeded(ctx.clock.now());
    return value;
  } catch (e) {
    d.failed(e, ctx.clock.now());
    throw e;
  }
}

/**
 * One call of a model group (`async_function_with_retries`, R:4380-4495): an attempt; on
 * its failure, with no healthy deployment left, the first error at once
 * (`should_retry_this_error`, R:4548-4611: checked once, on the first failure); else a
 * wait, and num_retries more attempts, each followed by a wait when it fails, the last
 * one too (R:4488), then the first error. A 400 or a 429 is retried like a 503.
 */
export async function litellmGroupCall<T>(
  d: LiteLLMDeployment,
  ctx: RouterContext,
  signal: AbortSignal | undefined,
  send: (s: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  let e0: unknown;
  try {
    return await attempt(d, ctx, signal, send);
  } catch (e) {
    e0 = e;
  }
  const now = () => ctx.clock.now();
  if (signal?.aborted || d.cooling(now())) throw e0;
  await ctx.clock.sleep(waitMs(e0, 0, ctx.random, now()), signal);
  for (let i = 0; i < 2; i++) {
    try {
      return await attempt(d, ctx, signal, send);
    } catch {
      if (signal?.aborted) throw e0;
      await ctx.clock.sleep(waitMs(e0, i, ctx.random, now()), signal);
    }
  }
  throw e0;
}

/**
 * The Router with `fallbacks=[{primary: [fallback]}]` (router_utils/
 * fallback_event_handlers.py:45-161, R:4066-4255): any error the primary's group gives up
 * with sends the call to the fallback's group, with its own retries; when both fail, the
 * caller gets the primary's first error (R:4228-4255).
 */
export async function litellmWithFallback<T>(
  groups: readonly [LiteLLMDeployment, LiteLLMDeployment],
  ctx: RouterContext,
  signal: AbortSignal | undefined,
  send: readonly [(s?: AbortSignal) => Promise<T>, (s?: AbortSignal) => Promise<T>],
): Promise<T> {
  try {
    return await litellmGroupCall(groups[0], ctx, signal, send[0]);
  } catch (e0) {
    if (signal?.aborted) throw e0;
    return litellmGroupCall(groups[1], ctx, signal, send[1]).catch(() => {
      throw e0;
    });
  }
}
