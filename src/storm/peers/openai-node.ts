import { header, hintMs, isAbort, type PeerLayer, sdkRetryable, statusOf } from "./layers.ts";

/** openai-node's backoff: min(0.5 s·2^n, 8 s)·(1 − 0.25·U) (6.49.0 client.js:610-619,
 * 7.59.0 client.js:1198-1207). */
const backoff = (n: number, random: () => number) =>
  Math.min(500 * 2 ** n, 8_000) * (1 - 0.25 * random());

/** Whether openai-node retries an answer: `x-should-retry` obeyed, then 408, 409, 429 and
 * >= 500 (an `insufficient_quota` 429 included) (6.49.0 :558-577, 7.59.0 :1121-1142). */
function retries(e: unknown, status: number): boolean {
  const word = header(e, "x-should-retry");
  return word === "true" || (word !== "false" && sdkRetryable(status));
}

/**
 * openai-node 6.49.0 (`client.js`), the version this project pins: maxRetries 2; a 600 s
 * timeout per attempt; connection errors and timeouts retried (:402-421); the answers
 * `retries` names; the hint (`retry-after-ms`, else `retry-after`) slept as it is, with no
 * upper limit (:580-606); else the backoff. Aborts stop it (:395-406).
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
      if (!retries(e, status)) return undefined;
      const hint = hintMs(e, now);
      if (!Number.isNaN(hint)) return Math.max(0, hint);
    }
    return backoff(n, random);
  },
};

/**
 * openai-node 7.59.0 (`client.js`), what @openai/agents 0.20 and @langchain/openai 1.6
 * depend on: as 6.49 but a hint is slept only when finite and within [0, 60 s]; a longer,
 * negative or unreadable one falls back to the backoff (:1143-1172). Default timeout 600 s
 * (:241, :1824); aborts stop it, its sleeps included (:1184-1194).
 */
export const OPENAI_NODE_7: PeerLayer = {
  ...OPENAI_NODE,
  name: "openai-node 7",
  next(e, n, random, now) {
    if (isAbort(e)) return undefined;
    const status = statusOf(e);
    if (status !== undefined) {
      if (!retries(e, status)) return undefined;
      const hint = hintMs(e, now);
      if (hint >= 0 && hint <= 60_000) return hint;
    }
    return backoff(n, random);
  },
};
