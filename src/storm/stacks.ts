import {
  type Backoff,
  CircuitBreaker,
  classify,
  type Failure,
  guardTool,
  type Policy,
  type PolicyOptions,
  policy,
  RetryBudget,
  Run,
} from "../index.ts";
import type { StackClient, StackContext, StormStack, TurnInfo } from "./types.ts";

/** A peer's own backoff formula, as a Backoff the policy can run. */
function formula(name: string, delay: (n: number, random: () => number) => number): Backoff {
  return Object.freeze({
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

const CALLER_RERUN: PolicyOptions = {
  maxAttempts: 2,
  backoff: formula("caller: rerun at once", () => 0),
  classify: hints(0),
};

/** Runs `leaf` inside nested policies, outermost first: each layer retries what the layer
 * inside it gave up on. */
function nest<T>(
  policies: Policy[],
  signal: AbortSignal | undefined,
  leaf: (signal: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  const at = (i: number, s: AbortSignal | undefined): Promise<T> =>
    i === policies.length
      ? leaf(s)
      : policies[i]!.execute((a) => at(i + 1, a.signal), s ? { signal: s } : undefined);
  return at(0, signal);
}

/**
 * The tool decorator of worked example W2 (docs/architecture.md) as teams write it before reading on: 4 attempts, full
 * jitter from 200 ms capped at 2 s, 3 s per attempt, 8 s in all, but no idempotency key
 * and no shared budget. Frameworks do not retry tools themselves, so this is the layer.
 */
const W2_DECORATOR: PolicyOptions = {
  maxAttempts: 4,
  backoff: { baseMs: 200, capMs: 2_000 },
  attemptTimeoutMs: 3_000,
  deadlineMs: 8_000,
};

/** A peer stack: its documented model-call layers; tool calls through W2's decorator,
 * inside `toolOuter` (layers that rerun the tool call from outside), if any. */
function layered(
  ctx: StackContext,
  layers: PolicyOptions[],
  toolOuter: PolicyOptions[] = [],
): StackClient {
  const make = (o: PolicyOptions) =>
    policy({ clock: ctx.clock, random: ctx.random, retryAfter: PEER_RETRY_AFTER, ...o });
  const policies = layers.map(make);
  const toolPolicies = [...toolOuter, W2_DECORATOR].map(make);
  return {
    model: (request, { signal }) => nest(policies, signal, (s) => ctx.provider.call(request, s)),
    tool: (args, { signal }) =>
      nest(toolPolicies, signal, (s) => ctx.tool.call(args, s ? { signal: s } : {})).then(
        () => true,
        () => false,
      ),
  };
}

/**
 * The naive layered stack of worked example W1 (docs/architecture.md): the caller reruns a failed call (2 attempts), a
 * decorator copied from a blog retries (3 attempts, 1 s doubling), and the SDK's defaults
 * were never touched (java-genai: 5 attempts, 1 s·2^(n-1) scaled by U(0,2), capped at 60 s,
 * Retry-After not read). Up to 2 × 3 × 5 = 30 requests per logical call. The team's 60 s
 * call timeout is W3's. The caller does not wire cancellation through.
 */
export const naive: StormStack = {
  name: "naive",
  description: "caller 2 × decorator 3 × SDK 5 (W1), 60 s timeout (W3)",
  propagatesCancel: false,
  create: (ctx) =>
    layered(
      ctx,
      [
        CALLER_RERUN,
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
      ],
      // The caller's rerun repeats the turn's tool call too (W1: it repeats a refund tool
      // call that had already succeeded).
      [CALLER_RERUN],
    ),
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
 * honoured up to 30 s, no total timeout on a call (size one above the longest answer; the run's deadline, the user's patience, bounds every call), a retry budget of 10
 * tokens at 0.1 per success and a breaker shared by every conversation (it opens when 90%
 * of at least 50 calls in 10 s failed: the upstream is down, not degraded), and each turn a
 * Run bounded by the user's patience. Tool calls go through guardTool with idempotency keys.
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
    // Tools: W2's spec through guardTool, with idempotency keys and a budget of 0.1 per
    // call with a burst of 20, shared by every session.
    const charge = guardTool(
      (args: { order: number }, tc) =>
        ctx.tool.call(args, { idempotencyKey: tc.idempotencyKey, signal: tc.signal }),
      {
        name: "charge",
        effect: "idempotent",
        budget: new RetryBudget({ maxTokens: 20, tokenRatio: 0.1 }),
        policy: { clock: ctx.clock, random: ctx.random, ...W2_DECORATOR },
      },
    );
    return {
      model: (request, { signal, turn }) =>
        p.execute((a) => ctx.provider.call(request, a.signal), {
          run: runOf(turn),
          ...(signal && { signal }),
        }),
      tool: async (args, { signal, turn }) => {
        const result = await charge(args, { run: runOf(turn), ...(signal && { signal }) });
        return (result as { status?: string }).status !== "error";
      },
    };
  },
};

export const STACKS: readonly StormStack[] = [naive, openaiSdk, aiSdk, langchain, breakwater];
