import { type PeerLayer, statusOf } from "./layers.ts";

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
