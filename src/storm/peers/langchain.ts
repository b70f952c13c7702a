import { codeOf, header, isAbort, messageOf, type PeerLayer, statusOf } from "./layers.ts";

/** @langchain/core 1.4.0 `dist/utils/async_caller.js`: the statuses it never retries
 * (:12-23), the quota wording that stops a 429 (:25-34), the wait a message names (:35). */
const NO_RETRY = new Set([400, 401, 402, 403, 404, 405, 406, 407, 409, 413]);
const QUOTA = [
  /insufficient[_ -]?quota/i,
  /exceeded (?:your|the current|the available).+quota/i,
  /usage quota/i,
  /quota (?:has been )?exhausted/i,
  /billing/i,
  /credit balance/i,
  /out of credits/i,
  /will reset at/i,
];
const HINT =
  /(?:try again in|retry after)\s+(\d+(?:\.\d+)?)\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b/i;

/** The 429 wait @langchain/core 1.4.0 reads: `retry-after` as a number of seconds >= 0,
 * else an HTTP-date (a past one is 0) (:87-98); else a wait the message names (:62-73). */
function hintMs(e: unknown, now: number): number | undefined {
  const ra = header(e, "retry-after")?.trim();
  if (ra) {
    const seconds = Number(ra);
    if (!Number.isNaN(seconds) && seconds >= 0) return seconds * 1000;
    const date = Date.parse(ra);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  const m = HINT.exec(messageOf(e));
  if (!m) return undefined;
  const value = Number(m[1]);
  const unit = m[2]!.toLowerCase();
  if (unit === "ms" || unit.startsWith("millisecond")) return value;
  if (unit === "m" || unit.startsWith("min")) return value * 60_000;
  if (unit === "h" || unit.startsWith("hr") || unit.startsWith("hour")) return value * 3_600_000;
  return value * 1000;
}

/** What the AsyncCaller's failed-attempt handler makes of an error: whether its own loop
 * stops, the retryable mark it stamps (what the v1 middleware reads), and the 429 wait it
 * records as `retryAfterMs`. */
interface Mark {
  readonly stop: boolean;
  readonly retryable: boolean | undefined;
  readonly retryAfterMs?: number | undefined;
}

const STOP: Mark = { stop: true, retryable: false };
const GO: Mark = { stop: false, retryable: undefined };

/**
 * @langchain/core 1.4.0 `defaultFailedAttemptHandler` (async_caller.js:133-161): an abort
 * stops it, unretryable (:136), ECONNABORTED stops it unmarked (:137); 400-407, 409 and 413
 * (:139) and an `insufficient_quota` code, from `error.code` then `error.error.code`
 * (:47-51, :140-147), stop it, unretryable. A 429 (:99-127, :149-159): naming a quota stops
 * it, unretryable; a wait of at most 60 s is waited (marked retryable); a longer one, or
 * none, stops it but is marked retryable ("capacity"), with the wait recorded. Everything
 * else goes on, unmarked: 5xx, 408, 410-412, 414-428, timeouts and status-less errors.
 */
function mark(e: unknown, now: number): Mark {
  if (isAbort(e)) return STOP;
  const direct = (e as { code?: unknown } | null)?.code;
  if (direct === "ECONNABORTED") return { stop: true, retryable: undefined };
  const status = statusOf(e);
  if (status !== undefined && NO_RETRY.has(status)) return STOP;
  if ((typeof direct === "string" ? direct : codeOf(e)) === "insufficient_quota") return STOP;
  if (status !== 429) return GO;
  const message = messageOf(e);
  if (QUOTA.some((q) => q.test(message))) return STOP;
  const hint = hintMs(e, now);
  return { stop: hint === undefined || hint > 60_000, retryable: true, retryAfterMs: hint };
}

/**
 * LangChain.js: `ChatOpenAI` (@langchain/openai 1.6.0) over the `AsyncCaller` of
 * @langchain/core 1.4.0 (`dist/utils/async_caller.js`). maxRetries 6 (:182) through its
 * copy of p-retry with `randomize` (:197): round((1 + U)·1 s·2^n), no cap
 * (p-retry/index.js:31-33, :91-95); what `mark` stops is not retried, a 429 with a wait
 * of at most 60 s waits max(backoff, wait) (p-retry :67-68). The openai client under it
 * keeps its 600 s timeout and has `maxRetries: 0`. Cancellation reaches it:
 * @langchain/openai passes the caller's signal into each SDK request
 * (chat_models/completions.js:107-114), so an abort ends the attempt in flight and no
 * request goes out after it.
 */
export const LANGCHAIN: PeerLayer = {
  name: "langchain",
  maxAttempts: 7,
  timeoutMs: 600_000,
  cancels: true,
  next(e, n, random, now) {
    const m = mark(e, now);
    if (m.stop) return undefined;
    const backoff = Math.round((1 + random()) * 1_000 * 2 ** n);
    return Math.max(backoff, m.retryAfterMs ?? 0);
  },
};

/** The AsyncCaller under the v1 middleware: it passes `maxRetries: 0` down with each
 * request (langchain 1.5.14 dist/agents/middleware/modelRetry.js:153-159; through
 * `bindTools` and @langchain/openai's `callWithOptions`, core async_caller.js:201), so one
 * request per middleware attempt. */
export const ASYNC_CALLER_ONCE: PeerLayer = { ...LANGCHAIN, name: "AsyncCaller", maxAttempts: 1 };

/** modelRetryMiddleware's wait (langchain 1.5.14 middleware/utils.js:67-79, defaults
 * constants.js:11-37): min(1 s·2^n, 60 s)·(1 ± 0.25·U), floored at the error's
 * `retryAfterMs` (the AsyncCaller's 429 wait; uncapped). */
const middlewareWait = (n: number, random: () => number, floor = 0) => {
  const d = Math.min(1_000 * 2 ** n, 60_000);
  return Math.max(Math.max(0, d + (random() * 2 - 1) * 0.25 * d), floor);
};

/**
 * LangChain.js v1's `modelRetryMiddleware()` as `createAgent({ middleware })` runs it
 * (langchain 1.5.14, dist/agents/middleware/modelRetry.js:152-172): 3 attempts (maxRetries
 * 2), each one request through the AsyncCaller (`ASYNC_CALLER_ONCE`). It retries unless
 * the error is marked unretryable (`retryOn` = `getRetryable(e) ?? true`, constants.js:17):
 * so a 429 with no hint or a long one is retried here though the AsyncCaller alone stops,
 * and the wait floors at the 429's hint however long. Its sleep is a bare setTimeout
 * (utils.js:53-55), but the caller's signal reaches the request (AgentNode.js:150-154), so
 * nothing is sent after an abort. At the last failure its default `onFailure: "continue"`
 * (modelRetry.js:23-27, :142-148) answers with an AIMessage of the error's text: the agent
 * ends without an answer, which the storm counts as the failure it is.
 */
export const LANGCHAIN_V1_RETRY: PeerLayer = {
  name: "modelRetryMiddleware",
  maxAttempts: 3,
  timeoutMs: Number.POSITIVE_INFINITY,
  cancels: true,
  next(e, n, random, now) {
    const m = mark(e, now);
    return m.retryable === false ? undefined : middlewareWait(n, random, m.retryAfterMs);
  },
};

/**
 * `modelRetryMiddleware()` listed before `modelFallbackMiddleware(fallback)`, so outside
 * it (createAgent makes the first middleware the outermost, AgentNode.js:194-199), the one
 * order in which the fallback is ever tried at the defaults. Each attempt is the primary,
 * then on any error the fallback (modelFallback.js:36-69: no predicate); what the fallback
 * throws reaches the retry wrapped in a `MiddlewareError` (AgentNode.js:317-318,
 * errors.js:62-81) that carries no mark and no `retryAfterMs`: every error is retried, at
 * the plain backoff.
 */
export const LANGCHAIN_V1_RETRY_OVER_FALLBACK: PeerLayer = {
  ...LANGCHAIN_V1_RETRY,
  name: "modelRetryMiddleware over modelFallbackMiddleware",
  next: (_e, n, random) => middlewareWait(n, random),
};
