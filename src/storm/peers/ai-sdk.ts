import { hintMs, isAbort, isTimeout, type PeerLayer, sdkRetryable, statusOf } from "./layers.ts";

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
    if (status !== undefined && !sdkRetryable(status)) return undefined;
    const hint = status === undefined ? Number.NaN : hintMs(e, now);
    return hint >= 0 && (hint < 60_000 || hint < backoff) ? hint : backoff;
  },
};
