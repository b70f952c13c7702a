import {
  header,
  isAbort,
  isTimeout,
  messageOf,
  oneRequest,
  type PeerCallContext,
  runLayers,
  sdkRetryable,
  statusOf,
} from "./layers.ts";

/*
 * ai-retry 2.4.0 (`createRetryableModel` from ai-retry/language-model; dist file names
 * below), under `generateText({ maxRetries: 0 })` as its README tells (README.md:475-499),
 * so the AI SDK's own loop never runs.
 */

/** Which of the two upstreams an attempt goes to. */
export type Upstream = 0 | 1;

/** One entry of `retries`, as `findRetryModel` walks them (telemetry-X86AwQZe.mjs:34-85):
 * the first that matches the failure and whose model has fewer attempts in this call than
 * its `maxAttempts` picks the next attempt. */
interface Entry {
  readonly matches: (error: unknown) => boolean;
  /** The upstream it sends to; "same": the one that just failed (`.retry()`). */
  readonly to: Upstream | "same";
  readonly maxAttempts: number;
  /** `delay`, and whether it reads Retry-After (`.retry()` only). */
  readonly delayMs: number;
  readonly backoffFactor: number;
  readonly readsRetryAfter: boolean;
}

/** `error.isRetryable(true)` (not-Ub81bJnc.mjs:192-194): an APICallError the AI SDK marked
 * retryable: 408, 409, 429, >= 500 (@ai-sdk/provider dist/index.js:70). */
const isRetryable = (e: unknown) => {
  const s = statusOf(e);
  return s !== undefined && sdkRetryable(s);
};

/** `error.isRetryable(true).retry({ delay: 1_000, backoffFactor: 2 })`, the README's
 * first example (README.md:61-82): the same model once more (`maxAttempts` 2,
 * not-Ub81bJnc.mjs:77-107), after delay·factor^(its attempts so far), so 2 s
 * (telemetry-X86AwQZe.mjs:191-193, :219-223), or the Retry-After capped at 60 s
 * (parse-retry-headers-C6tF75Fp.mjs:7-23). */
const RETRY_SAME: Entry = {
  matches: isRetryable,
  to: "same",
  maxAttempts: 2,
  delayMs: 1_000,
  backoffFactor: 2,
  readsRetryAfter: true,
};

/** `httpStatus(529, 'overloaded').switch({ model: fallback })` (README.md:66-69): a 529,
 * or "overloaded" in the message (not-Ub81bJnc.mjs:227-233, :276-284), goes to the
 * fallback once, at once (:53-62). */
const SWITCH_OVERLOADED: Entry = {
  matches: (e) => statusOf(e) === 529 || /overloaded/i.test(messageOf(e)),
  to: 1,
  maxAttempts: 1,
  delayMs: 0,
  backoffFactor: 1,
  readsRetryAfter: false,
};

/** A plain fallback model at the end of `retries` (README.md:229-250): anything left
 * over goes to it once, at once. */
const FALLBACK: Entry = { ...SWITCH_OVERLOADED, matches: () => true };

/** The single-upstream stack: the README's first example without its switches (there is
 * no second model to switch to). */
export const AI_RETRY: readonly Entry[] = [RETRY_SAME];
/** With a second provider: the README's first example, its switch aimed at it, and the
 * plain fallback its "Fallbacks" section adds for whatever is left. */
export const AI_RETRY_FALLBACK: readonly Entry[] = [SWITCH_OVERLOADED, RETRY_SAME, FALLBACK];

/** `.retry()`'s Retry-After (parse-retry-headers-C6tF75Fp.mjs:8-23): `retry-after-ms`,
 * else `retry-after` seconds or an HTTP-date; null when none. */
function retryAfterMs(e: unknown, now: number): number | null {
  const ms = Number.parseFloat(header(e, "retry-after-ms") ?? "");
  if (!Number.isNaN(ms) && ms >= 0) return ms;
  const ra = header(e, "retry-after");
  if (!ra) return null;
  const s = Number.parseFloat(ra);
  if (!Number.isNaN(s)) return s * 1000;
  const date = Date.parse(ra);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** What a stack gives the loop: time, randomness and the app's per-attempt timeout. */
export type AiRetryContext = PeerCallContext;

/** The next attempt after `e` at `at`, and the wait before it; undefined: none matched. */
function pick(entries: readonly Entry[], e: unknown, at: Upstream, tries: number[], now: number) {
  for (const entry of entries) {
    if (!entry.matches(e)) continue;
    const to = entry.to === "same" ? at : entry.to;
    if (tries[to]! >= entry.maxAttempts) continue;
    const hint = entry.readsRetryAfter && statusOf(e) !== undefined ? retryAfterMs(e, now) : null;
    const wait =
      hint !== null ? Math.min(hint, 60_000) : entry.delayMs * entry.backoffFactor ** tries[to]!;
    return { to, wait };
  }
  return undefined;
}

/**
 * One call through ai-retry's loop (create-retryable-model-Dd1NFLE-.mjs:22-165): an
 * attempt at the primary; on a failure, the entries pick the next attempt and its wait
 * (an abortable sleep, @ai-sdk/provider-utils :41-64), until none matches. An abort, or a
 * timeout the app set on the call's signal, is never retried nor switched (:145-152;
 * retry-dies-on-aborted-signal-BgYC6YoN.mjs:113-114). No timeout of its own. The loop's
 * state is per call here: 2.4.0 keeps the current model in one field of the shared model
 * object (:225, :252-254), so concurrent calls through one instance misattribute their
 * attempts; the storm models the loop as written for one call (see docs/storm.md).
 */
export async function aiRetryCall<T>(
  entries: readonly Entry[],
  ctx: AiRetryContext,
  signal: AbortSignal | undefined,
  send: readonly ((s: AbortSignal | undefined) => Promise<T>)[],
): Promise<T> {
  const request = oneRequest("ai-retry attempt", ctx.timeoutMs);
  const tries = [0, 0];
  let at: Upstream = 0;
  for (;;) {
    try {
      return await runLayers([request], ctx, signal, send[at]!);
    } catch (e) {
      tries[at]!++;
      if (signal?.aborted || isAbort(e) || isTimeout(e)) throw e;
      const next = pick(entries, e, at, tries, ctx.clock.now());
      if (next === undefined) throw e;
      if (next.wait > 0) await ctx.clock.sleep(next.wait, signal);
      at = next.to;
    }
  }
}
