import type { Backoff } from "../core/backoff.ts";
import { CircuitBreaker } from "../core/breaker.ts";
import { RetryBudget } from "../core/budget.ts";
import { classify } from "../core/classify.ts";
import type { Failure } from "../core/failure.ts";
import type { Usage } from "../core/usage.ts";
import type { PolicyOptions } from "../policy/options.ts";
import { policy } from "../policy/policy.ts";
import { Run } from "../run/run.ts";
import type { StackClient, StackContext, StormStack, TurnInfo } from "./types.ts";

/** A peer's own backoff formula, as a Backoff the policy can run. */
function formula(name: string, delay: (n: number, random: () => number) => number): Backoff {
  return Object.freeze({
    baseMs: 0,
    capMs: Number.POSITIVE_INFINITY,
    jitter: "none" as const,
    rateLimitBaseMs: 0,
    name,
    delay: (n: number, _kind: unknown, _prev: number, random: () => number) => delay(n, random),
  });
}

/** The built-in classifier, minus Retry-After hints a peer ignores (or ignores above a limit). */
function hints(maxMs: number) {
  return (error: unknown, now: number): Failure => {
    const f = classify(error, now);
    if (f.retryAfterMs === undefined || f.retryAfterMs <= maxMs) return f;
    const { retryAfterMs: _, ...rest } = f;
    return rest;
  };
}

/** Peers sleep the hint (or their formula) as is: no cap that gives up, no extra jitter. */
const PEER_RETRY_AFTER = { maxMs: 2_147_483_647, jitterMs: 0 };

/** Nests policies, outermost first: each layer retries what the layer inside gave up on. */
function layered(ctx: StackContext, layers: PolicyOptions[]): StackClient {
  const policies = layers.map((o) =>
    policy({ clock: ctx.clock, random: ctx.random, retryAfter: PEER_RETRY_AFTER, ...o }),
  );
  const run = (
    i: number,
    request: Parameters<StackClient["model"]>[0],
    signal: AbortSignal | undefined,
  ): Promise<Usage> =>
    i === policies.length
      ? ctx.provider.call(request, signal)
      : policies[i]!.execute((a) => run(i + 1, request, a.signal), signal ? { signal } : undefined);
  return {
    model: (request, { signal }) => run(0, request, signal),
    // A peer tool call: the same layers around the dependency, no idempotency key.
    tool: async (args, { signal }) => {
      const call = (i: number): Promise<unknown> =>
        i === policies.length
          ? ctx.tool.call(args, signal ? { signal } : {})
          : policies[i]!.execute((a) => call(i + 1), signal ? { signal } : undefined);
      return call(0).then(
        () => true,
        () => false,
      );
    },
  };
}

/**
 * The naive layered stack of seed 000: the caller reruns a failed call (2 attempts), a
 * decorator copied from a blog retries (3 attempts, 1 s doubling), and the SDK's defaults
 * were never touched (java-genai: 5 attempts, 1 s·2^(n-1) scaled by U(0,2), capped at 60 s,
 * Retry-After not read). Up to 2 × 3 × 5 = 30 requests per logical call. The team's 60 s
 * call timeout is seed 004's. The caller does not wire cancellation through.
 */
export const naive: StormStack = {
  name: "naive",
  description: "caller 2 × decorator 3 × SDK 5 (seed 000), 60 s timeout (seed 004)",
  propagatesCancel: false,
  create: (ctx) =>
    layered(ctx, [
      { maxAttempts: 2, backoff: formula("caller: rerun at once", () => 0), classify: hints(0) },
      {
        maxAttempts: 3,
        backoff: formula("decorator: 1 s doubling", (n) => 1000 * 2 ** (n - 1)),
        classify: hints(0),
      },
      {
        maxAttempts: 5,
        attemptTimeoutMs: 60_000,
        backoff: formula("java-genai: 1 s·2^(n-1)·U(0,2), cap 60 s", (n, r) =>
          Math.min(60_000, 1000 * 2 ** (n - 1) * 2 * r()),
        ),
        classify: hints(0),
      },
    ]),
};

/**
 * openai-node defaults (client.mjs calculateDefaultRetryTimeoutMillis): maxRetries 2 (3
 * attempts), min(0.5 s·2^(n-1), 8 s)·(1 − 0.25·rand), Retry-After honoured when up to 60 s,
 * a 600 s timeout per attempt.
 */
export const openaiSdk: StormStack = {
  name: "openai-sdk",
  description: "3 attempts, 0.5 s doubling to 8 s, −25% jitter, Retry-After ≤ 60 s",
  propagatesCancel: true,
  create: (ctx) =>
    layered(ctx, [
      {
        maxAttempts: 3,
        attemptTimeoutMs: 600_000,
        backoff: formula(
          "openai-node",
          (n, r) => Math.min(500 * 2 ** (n - 1), 8_000) * (1 - 0.25 * r()),
        ),
        classify: hints(60_000),
      },
    ]),
};

/**
 * The AI SDK's defaults (ai retry-with-exponential-backoff.ts): maxRetries 2 (3 attempts),
 * initialDelayInMs 2000, backoffFactor 2, no jitter, Retry-After used when under 60 s; its
 * providers call fetch directly, so no SDK retries underneath.
 */
export const aiSdk: StormStack = {
  name: "ai-sdk",
  description: "3 attempts, 2 s then 4 s, no jitter",
  propagatesCancel: true,
  create: (ctx) =>
    layered(ctx, [
      {
        maxAttempts: 3,
        backoff: formula("ai-sdk", (n) => 2000 * 2 ** (n - 1)),
        classify: hints(59_999),
      },
    ]),
};

/**
 * LangChain.js core AsyncCaller (async_caller.js): maxRetries 6 (7 attempts) through p-retry
 * with randomize, (1 + rand)·1 s·2^(n-1) and no cap; no retry for 400–407, 409, 413, a spent
 * quota, or a 429 without Retry-After; it waits its own backoff, not the hint.
 */
export const langchain: StormStack = {
  name: "langchain",
  description: "7 attempts, (1+rand)·1 s·2^(n-1), no cap",
  propagatesCancel: true,
  create: (ctx) =>
    layered(ctx, [
      {
        maxAttempts: 7,
        backoff: formula("langchain p-retry", (n, r) => (1 + r()) * 1000 * 2 ** (n - 1)),
        classify: (error, now) => {
          const f = classify(error, now);
          const noRetry = f.status === 429 && f.retryAfterMs === undefined;
          const { retryAfterMs: _, ...rest } = f;
          return noRetry ? { ...rest, retryable: false } : rest;
        },
      },
    ]),
};

/**
 * breakwater: one layer. 3 attempts with full jitter (0.5 s base, 8 s cap), Retry-After
 * honoured up to 30 s, a 60 s attempt timeout (the naive stack's), a retry budget of 10
 * tokens at 0.1 per success and a breaker shared by every conversation (it opens when 90%
 * of at least 50 calls in 10 s failed: the upstream is down, not degraded), and each turn a
 * Run bounded by the user's patience.
 */
export const breakwater: StormStack = {
  name: "breakwater",
  description: "one layer: budget, deadline, breaker, run limits",
  propagatesCancel: true,
  create: (ctx) => {
    const budget = new RetryBudget({ maxTokens: 10, tokenRatio: 0.1 });
    const breaker = new CircuitBreaker({
      clock: ctx.clock,
      consecutiveFailures: 1_000_000,
      failureRatio: 0.9,
      minimumThroughput: 50,
      windowMs: 10_000,
      openMs: 5_000,
    });
    const p = policy({
      clock: ctx.clock,
      random: ctx.random,
      maxAttempts: 3,
      backoff: { baseMs: 500, capMs: 8_000 },
      retryAfter: { maxMs: 30_000 },
      attemptTimeoutMs: 60_000,
      budget,
      breaker,
    });
    const runOf = (turn: TurnInfo) => {
      let run = turn.state.get("run") as Run | undefined;
      if (run === undefined) {
        run = new Run({
          clock: ctx.clock,
          deadlineMs: turn.patienceMs,
          maxAttempts: 12,
          id: `turn-${turn.id}`,
        });
        turn.state.set("run", run);
      }
      return run;
    };
    return {
      model: (request, { signal, turn }) =>
        p.execute((a) => ctx.provider.call(request, a.signal), {
          run: runOf(turn),
          ...(signal && { signal }),
        }),
    };
  },
};

export const STACKS: readonly StormStack[] = [naive, openaiSdk, aiSdk, langchain, breakwater];
