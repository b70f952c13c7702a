import { header, isAbort, isTimeout, type PeerLayer, sdkRetryable, statusOf } from "./layers.ts";
import { OPENAI_NODE_7 } from "./openai-node.ts";

/** The runner's hint (@openai/agents-core 0.20.0 dist/runner/modelRetry.js:366-391):
 * `retry-after-ms` when finite and >= 0; else `retry-after` seconds, rounded to the ms,
 * or an HTTP-date still ahead. Never capped (:695-701). */
function hintMs(e: unknown, now: number): number | undefined {
  const ms = Number(header(e, "retry-after-ms"));
  if (header(e, "retry-after-ms") !== undefined && Number.isFinite(ms) && ms >= 0) return ms;
  const ra = header(e, "retry-after");
  if (!ra) return undefined;
  const s = Number(ra);
  if (Number.isFinite(s) && s >= 0) return Math.round(s * 1000);
  const date = Date.parse(ra);
  return !Number.isNaN(date) && date - now > 0 ? date - now : undefined;
}

/**
 * The OpenAI Agents SDK's runner retries (@openai/agents 0.20.0), with the retry settings
 * its documentation shows (docs models.mdx:277, `examples/docs/models/retry.ts`; runner
 * retries are opt-in, maxRetries 0 by default, modelRetry.js:836): maxRetries 4, backoff
 * 500 ms doubling to 5 s with jitter ×[0.875, 1.125] (round(min(500·2^n, 5000)·(0.875 +
 * 0.25·U)), :540-551), policy `any(providerSuggested(), retryAfter(), networkError(),
 * httpStatus([408, 409, 429, 500, 502, 503, 504]))` (:704-794). An abort vetoes (:658);
 * `x-should-retry: false` is a hard veto (agents-openai retryAdvice.js:52-101, :713-721);
 * else a stateless request is retried on 408, 409, 429 and >= 500, on any error with a
 * wait hint, and on network errors (:290-323), but not after a timeout: the client's
 * timeout error carries the fetch's abort as its cause. The wait is the hint, uncapped,
 * else the backoff (:695-701). The runner sets no timeout of its own (`timeoutMs` unset)
 * and its waits end on an abort (:601-632).
 */
export const OPENAI_AGENTS: PeerLayer = {
  name: "openai-agents runner",
  maxAttempts: 5,
  timeoutMs: Number.POSITIVE_INFINITY,
  cancels: true,
  next(e, n, random, now) {
    // A timeout too: openai 7.59's APIConnectionTimeoutError keeps the fetch's AbortError
    // as its cause (client.js:888, :930), which the runner reads as an abort, an absolute
    // veto (modelRetry.js:277-289, :400, :658).
    if (isAbort(e) || isTimeout(e)) return undefined;
    const status = statusOf(e);
    if (header(e, "x-should-retry") === "false") return undefined;
    const hint = hintMs(e, now);
    // providerSuggested() (a superset of the httpStatus list), retryAfter().
    const retry =
      header(e, "x-should-retry") === "true" ||
      (status !== undefined && sdkRetryable(status)) ||
      hint !== undefined;
    if (!retry) return undefined;
    return hint ?? Math.round(Math.min(500 * 2 ** n, 5_000) * (0.875 + 0.25 * random()));
  },
};

/**
 * The openai client inside each runner attempt (openai 7.59.0, what @openai/agents 0.20
 * depends on; `OPENAI_NODE_7`): its own two retries in the first runner attempt, none in
 * the later ones. The runner switches the client's retries off only from its second
 * attempt (`shouldDisableProviderManagedRetry`: `attempt > 1`, modelRetry.js:137-142;
 * agents-openai openaiResponsesModel.js:1028-1030, openaiChatCompletionsModel.js:509-511): up to 3 + 4 = 7 requests a call.
 */
export function openaiAgentsClient(runnerAttempt: number): PeerLayer {
  return runnerAttempt === 0 ? OPENAI_NODE_7 : { ...OPENAI_NODE_7, maxAttempts: 1 };
}
