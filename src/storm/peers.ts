import type { Clock } from "../index.ts";
import { readHeader } from "../internal.ts";

/**
 * The peers' own retry loops, read from their sources and cited line by line, so each peer
 * stack retries what that peer retries and waits what it waits, not what breakwater would.
 * A peer layer is its loop: attempt, ask its predicate, sleep its delay, again.
 */
export interface PeerLayer {
  readonly name: string;
  /** Attempts, the first included. */
  readonly maxAttempts: number;
  /** Per attempt, in ms (Infinity: none). */
  readonly timeoutMs: number;
  /** The wait before retry `n` (0 for the first retry) after `error`, in ms; undefined
   * when the peer does not retry it. `random` is [0, 1). */
  next(error: unknown, n: number, random: () => number, now: number): number | undefined;
  /** Whether the caller's abort reaches the loop: stops its waits and aborts its attempt. */
  readonly cancels: boolean;
}

/** A simulated attempt cut by the layer's own timeout. */
export class PeerTimeoutError extends Error {
  override name = "TimeoutError";
}

const statusOf = (e: unknown): number | undefined => {
  const s = (e as { status?: unknown } | null)?.status;
  return typeof s === "number" ? s : undefined;
};
const headersOf = (e: unknown) => (e as { headers?: unknown } | null)?.headers;
const codeOf = (e: unknown): string | undefined => {
  const c = (e as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof c === "string" ? c : undefined;
};
const messageOf = (e: unknown) => String((e as { message?: unknown } | null)?.message ?? "");
const isTimeout = (e: unknown) => e instanceof PeerTimeoutError;
const isAbort = (e: unknown) => (e as { name?: unknown } | null)?.name === "AbortError";

/** `retry-after-ms` then `retry-after` (seconds, else an HTTP-date), as openai-node and
 * the AI SDK read them: parseFloat, no cap; NaN when absent. */
function hintMs(e: unknown, now: number): number {
  const h = headersOf(e);
  const ms = Number.parseFloat(readHeader(h, "retry-after-ms") ?? "");
  if (!Number.isNaN(ms)) return ms;
  const ra = readHeader(h, "retry-after");
  if (ra === undefined) return Number.NaN;
  const s = Number.parseFloat(ra);
  return Number.isNaN(s) ? Date.parse(ra) - now : s * 1000;
}

/**
 * openai-node 6.49.0 (`client.js`): maxRetries 2; a 600 s timeout per attempt; connection
 * errors and timeouts retried (:402-421); `x-should-retry` obeyed, then 408, 409, 429 and
 * >= 500 retried (:558-577), an `insufficient_quota` 429 included; the hint
 * (`retry-after-ms`, else `retry-after`) slept as it is, with no upper limit (:580-606);
 * else min(0.5 s·2^n, 8 s)·(1 − 0.25·U) (:610-619). Aborts stop it (:395-406).
 */
export const OPENAI_NODE: PeerLayer = {
  name: "openai-node",
  maxAttempts: 3,
  timeoutMs: 600_000,
  cancels: true,
  next(e, n, random, now) {
    if (isAbort(e)) return undefined;
    const status = statusOf(e);
    if (status !== undefined) {
      const word = readHeader(headersOf(e), "x-should-retry");
      const retry =
        word === "true" ||
        (word !== "false" && (status === 408 || status === 409 || status === 429 || status >= 500));
      if (!retry) return undefined;
      const hint = hintMs(e, now);
      if (!Number.isNaN(hint)) return Math.max(0, hint);
    }
    return Math.min(500 * 2 ** n, 8_000) * (1 - 0.25 * random());
  },
};

/**
 * The AI SDK, ai 7.0.173 with @ai-sdk/provider-utils 5.0.81: maxRetries 2, 2 s then 4 s,
 * no jitter (provider-utils `retryWithExponentialBackoffInternal`, dist/index.js:3792-3828);
 * retried when `APICallError.isRetryable`: 408, 409, 429, >= 500 (ai dist/index.js:385-387),
 * and network failures (provider-utils :591-625); aborts never (:3796), so a timeout set
 * through its abort signal is not retried; `x-should-retry` not read; the hint used when
 * 0 <= hint and (hint < 60 s or hint < the backoff) (ai dist/index.js:2406-2423).
 */
export const AI_SDK: PeerLayer = {
  name: "ai-sdk",
  maxAttempts: 3,
  timeoutMs: Number.POSITIVE_INFINITY,
  cancels: true,
  next(e, n, _random, now) {
    if (isAbort(e) || isTimeout(e)) return undefined;
    const status = statusOf(e);
    const backoff = 2_000 * 2 ** n;
    if (
      status !== undefined &&
      !(status === 408 || status === 409 || status === 429 || status >= 500)
    )
      return undefined;
    const hint = status === undefined ? Number.NaN : hintMs(e, now);
    return hint >= 0 && (hint < 60_000 || hint < backoff) ? hint : backoff;
  },
};

/** @langchain/core 1.4.0 `dist/utils/async_caller.js`: the statuses it never retries
 * (:12-23), the quota wording that stops a 429 (:25-34), the wait a message names (:35). */
const LANGCHAIN_NO_RETRY = new Set([400, 401, 402, 403, 404, 405, 406, 407, 409, 413]);
const LANGCHAIN_QUOTA = [
  /insufficient[_ -]?quota/i,
  /exceeded (?:your|the current|the available).+quota/i,
  /usage quota/i,
  /quota (?:has been )?exhausted/i,
  /billing/i,
  /credit balance/i,
  /out of credits/i,
  /will reset at/i,
];
const LANGCHAIN_HINT =
  /(?:try again in|retry after)\s+(\d+(?:\.\d+)?)\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b/i;

/** The 429 wait @langchain/core 1.4.0 reads: `retry-after` as a number of seconds >= 0,
 * else an HTTP-date (a past one is 0) (:87-98); else a wait the message names (:60-71). */
function langchainHintMs(e: unknown, now: number): number | undefined {
  const ra = readHeader(headersOf(e), "retry-after")?.trim();
  if (ra) {
    const seconds = Number(ra);
    if (!Number.isNaN(seconds) && seconds >= 0) return seconds * 1000;
    const date = Date.parse(ra);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  const m = LANGCHAIN_HINT.exec(messageOf(e));
  if (!m) return undefined;
  const value = Number(m[1]);
  const unit = m[2]!.toLowerCase();
  if (unit === "ms" || unit.startsWith("millisecond")) return value;
  if (unit === "m" || unit.startsWith("min")) return value * 60_000;
  if (unit === "h" || unit.startsWith("hr") || unit.startsWith("hour")) return value * 3_600_000;
  return value * 1000;
}

/**
 * LangChain.js: `ChatOpenAI` (@langchain/openai 1.6.0) over the `AsyncCaller` of
 * @langchain/core 1.4.0 (`dist/utils/async_caller.js`). maxRetries 6 (:182) through its
 * copy of p-retry with `randomize` (:197): round((1 + U)·1 s·2^n), no cap
 * (p-retry/index.js:31-33, :91-95). It stops on an abort and ECONNABORTED (:136-137), on
 * 400-407, 409 and 413 (:139), on an `insufficient_quota` code, read from `error.code`
 * then `error.error.code` (:141-147); a 429 that names a quota stops, one whose wait is at
 * most 60 s waits max(backoff, wait) (:99-125, :150-153; p-retry :67-68), one with a longer
 * wait or none stops (:155-159); everything else is retried, 5xx, 408, 410-412, 414-428,
 * timeouts and status-less errors included. The openai client under it keeps its 600 s
 * timeout and has `maxRetries: 0`. Cancellation reaches it: @langchain/openai passes the
 * caller's signal into each SDK request (chat_models/completions.js:107-114), so an abort
 * ends the attempt in flight and no request goes out after it.
 */
export const LANGCHAIN: PeerLayer = {
  name: "langchain",
  maxAttempts: 7,
  timeoutMs: 600_000,
  cancels: true,
  next(e, n, random, now) {
    if (isAbort(e) || (e as { code?: unknown } | null)?.code === "ECONNABORTED") return undefined;
    const status = statusOf(e);
    if (status !== undefined && LANGCHAIN_NO_RETRY.has(status)) return undefined;
    const direct = (e as { code?: unknown } | null)?.code;
    if ((typeof direct === "string" ? direct : codeOf(e)) === "insufficient_quota")
      return undefined;
    const backoff = Math.round((1 + random()) * 1_000 * 2 ** n);
    if (status !== 429) return backoff;
    const message = messageOf(e);
    if (LANGCHAIN_QUOTA.some((q) => q.test(message))) return undefined;
    const hint = langchainHintMs(e, now);
    if (hint === undefined || hint > 60_000) return undefined;
    return Math.max(backoff, hint);
  },
};

/** Statuses the Google GenAI SDKs retry when retries are on (js-genai and java-genai
 * HttpRetryOptions defaults). */
const GENAI_RETRY = new Set([408, 429, 500, 502, 503, 504]);

/**
 * The naive stack of worked example W1 (docs/architecture.md): the caller reruns a failed
 * call at once (2 attempts), a decorator copied from a blog retries any failure (3
 * attempts, 1 s doubling), and the Google GenAI SDK's defaults were never touched (5
 * attempts on 408, 429, 500, 502, 503, 504 and connection failures, 1 s·2^n scaled by
 * U(0, 2), capped at 60 s, Retry-After not read). W3's 60 s call timeout. Nobody wires
 * cancellation through.
 */
export const NAIVE: readonly PeerLayer[] = [
  {
    name: "caller rerun",
    maxAttempts: 2,
    timeoutMs: Number.POSITIVE_INFINITY,
    cancels: false,
    next: () => 0,
  },
  {
    name: "decorator",
    maxAttempts: 3,
    timeoutMs: Number.POSITIVE_INFINITY,
    cancels: false,
    next: (_e, n) => 1_000 * 2 ** n,
  },
  {
    name: "java-genai",
    maxAttempts: 5,
    timeoutMs: 60_000,
    cancels: false,
    next(e, n, random) {
      const status = statusOf(e);
      if (status !== undefined && !GENAI_RETRY.has(status)) return undefined;
      return Math.min(60_000, 1_000 * 2 ** n * 2 * random());
    },
  },
];

/** One attempt under `layer`'s timeout: the provider never learns the client left. */
function attemptOnce<T>(
  clock: Clock,
  layer: PeerLayer,
  signal: AbortSignal | undefined,
  attempt: (signal: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  if (layer.timeoutMs === Number.POSITIVE_INFINITY) return attempt(signal);
  return new Promise<T>((resolve, reject) => {
    const cancel = clock.schedule(layer.timeoutMs, () =>
      reject(new PeerTimeoutError(`${layer.name}: timed out after ${layer.timeoutMs} ms`)),
    );
    attempt(signal).then(
      (v) => {
        cancel();
        resolve(v);
      },
      (e) => {
        cancel();
        reject(e);
      },
    );
  });
}

/**
 * Runs `leaf` inside the layers, outermost first: each layer retries what the layer inside
 * it gave up on, by its own rules. `timeoutMs` (the app's per-attempt timeout, when the
 * scenario sets one) replaces the innermost layer's.
 */
export async function runLayers<T>(
  layers: readonly PeerLayer[],
  ctx: { clock: Clock; random: () => number; timeoutMs?: number | undefined },
  signal: AbortSignal | undefined,
  leaf: (signal: AbortSignal | undefined) => Promise<T>,
  depth = 0,
): Promise<T> {
  const base = layers[depth]!;
  const last = depth === layers.length - 1;
  const layer = last && ctx.timeoutMs !== undefined ? { ...base, timeoutMs: ctx.timeoutMs } : base;
  const inner = (s: AbortSignal | undefined) =>
    last ? leaf(s) : runLayers(layers, ctx, s, leaf, depth + 1);
  const mine = layer.cancels ? signal : undefined;
  for (let n = 0; ; n++) {
    try {
      return await attemptOnce(ctx.clock, layer, mine, inner);
    } catch (error) {
      if (mine?.aborted || n + 1 >= layer.maxAttempts) throw error;
      const wait = layer.next(error, n, ctx.random, ctx.clock.now());
      if (wait === undefined) throw error;
      await ctx.clock.sleep(Math.max(0, wait), mine);
    }
  }
}
