import type { PeerLayer } from "./layers.ts";

/**
 * Temporal's default activity retry policy, as an activity that calls a model is written
 * without one of its own: every failure retried (the @temporalio/ai-sdk 1.23 adapter marks
 * every provider error retryable: "cannot be classified as deterministic here",
 * lib/activities.js:170-295), no Retry-After read, 1 s doubling to 100 s, no attempt
 * limit (@temporalio/common 1.24 lib/retry-policy.d.ts:8-40: initialInterval 1 s,
 * backoffCoefficient 2, maximumInterval "100x of initialInterval", maximumAttempts
 * "@default Infinity"). The server adds no jitter. The user who leaves does not stop the
 * workflow: its activity goes on retrying (`cancels: false`).
 */
export const TEMPORAL_ACTIVITY: PeerLayer = {
  name: "temporal activity",
  maxAttempts: Number.POSITIVE_INFINITY,
  timeoutMs: Number.POSITIVE_INFINITY,
  cancels: false,
  next: (_e, n) => Math.min(1_000 * 2 ** n, 100_000),
};

/**
 * Restate's `ctx.run` around a model call as its AI guide composes it: `durableCalls(ctx,
 * { maxRetryAttempts: 3 })` over the AI SDK's own retries, "3 × 2 = 6" requests by its
 * docs' count (restatedev/docs-restate docs/ai/patterns/error-handling.mdx), every error
 * retried (@restatedev/vercel-ai-middleware 0.2.1 dist/index.js: no classification);
 * intervals the SDK's defaults, 50 ms doubling to 10 s (@restatedev/restate-sdk 1.17
 * dist/context.d.ts, RunOptions). The invocation outlives the user who left.
 */
export const RESTATE_RUN: PeerLayer = {
  name: "restate ctx.run",
  maxAttempts: 3,
  timeoutMs: Number.POSITIVE_INFINITY,
  cancels: false,
  next: (_e, n) => Math.min(50 * 2 ** n, 10_000),
};
