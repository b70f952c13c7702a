import {
  CircuitBreaker,
  fallback,
  guardTool,
  type Policy,
  type PolicyOptions,
  policy,
  RateLimiter,
  RetryBudget,
  Run,
  type Usage,
} from "../index.ts";
import { AI_SDK, LANGCHAIN, NAIVE, OPENAI_NODE, type PeerLayer, runLayers } from "./peers.ts";
import type { StackClient, StackContext, StormStack, TurnInfo } from "./types.ts";

/**
 * The tool decorator of worked example W2 (docs/architecture.md) as teams write it before
 * reading on: 4 attempts, full jitter from 200 ms capped at 2 s, 3 s per attempt, 8 s in
 * all, but no idempotency key and no shared budget. Frameworks do not retry tools
 * themselves, so this is the layer.
 */
const W2_DECORATOR: PolicyOptions = {
  maxAttempts: 4,
  backoff: { baseMs: 200, capMs: 2_000 },
  attemptTimeoutMs: 3_000,
  deadlineMs: 8_000,
  budget: false,
};

/** W1's caller, rerunning a failed tool call at once. */
const CALLER_RERUN: PolicyOptions = {
  maxAttempts: 2,
  backoff: { delay: () => 0 },
  budget: false,
  classify: () => ({ kind: "unknown", retryable: true }),
};

/** Runs `leaf` inside nested policies, outermost first. */
function nest<T>(
  policies: Policy[],
  signal: AbortSignal | undefined,
  leaf: (s?: AbortSignal) => Promise<T>,
) {
  const at = (i: number, s: AbortSignal | undefined): Promise<T> =>
    i === policies.length
      ? leaf(s)
      : policies[i]!.execute((a) => at(i + 1, a.signal), s ? { signal: s } : undefined);
  return at(0, signal);
}

/** A peer stack: its own model-call loops; tool calls through W2's decorator, inside
 * `toolOuter` (layers that rerun the tool call from outside), if any. */
function peer(
  ctx: StackContext,
  layers: readonly PeerLayer[],
  toolOuter: PolicyOptions[] = [],
): StackClient {
  const loop = { clock: ctx.clock, random: ctx.random, timeoutMs: ctx.attemptTimeoutMs };
  const toolPolicies = [...toolOuter, W2_DECORATOR].map((o) =>
    policy({ clock: ctx.clock, random: ctx.random, ...o }),
  );
  return {
    model: (request, { signal }) =>
      runLayers(layers, loop, signal, (s) => ctx.provider.call(request, s)),
    tool: (args, { signal }) =>
      nest(toolPolicies, signal, (s) => ctx.tool.call(args, s ? { signal: s } : {})).then(
        () => true,
        () => false,
      ),
  };
}

/** A naive stack: retry layers that multiply (worked example W1). */
export const naive: StormStack = {
  name: "naive",
  description: "caller 2 × decorator 3 × SDK 5 (W1), 60 s timeout (W3)",
  propagatesCancel: false,
  create: (ctx) => peer(ctx, NAIVE, [CALLER_RERUN]),
};

/** The openai SDK's own retries (2, 0.5–8 s), as a stack. */
export const openaiSdk: StormStack = {
  name: "openai-sdk",
  description: "openai-node 6: 3 attempts, 0.5 s doubling to 8 s, −25% jitter, any Retry-After",
  propagatesCancel: true,
  create: (ctx) => peer(ctx, [OPENAI_NODE]),
};

/** The AI SDK's own retries (generateText's defaults), as a stack. */
export const aiSdk: StormStack = {
  name: "ai-sdk",
  description: "AI SDK 7: 3 attempts, 2 s then 4 s, Retry-After under 60 s",
  propagatesCancel: true,
  create: (ctx) => peer(ctx, [AI_SDK]),
};

/** LangChain's AsyncCaller retries (6, 1 s doubling), as a stack. */
export const langchain: StormStack = {
  name: "langchain",
  description: "LangChain.js 1.2: 7 attempts, (1+U)·1 s doubling; a 429 needs a hint",
  // Its AsyncCaller races the caller's abort; the retries behind it go on (peers.ts).
  propagatesCancel: false,
  create: (ctx) => peer(ctx, [LANGCHAIN]),
};

/** The policy the breakwater stacks give every model call: the library's defaults with
 * the attempts an agent needs (docs/architecture.md, rule 5: the admission, not the
 * attempt count, keeps retries in check). */
export function breakwaterPolicy(ctx: StackContext, limiter?: RateLimiter): Policy {
  return policy({
    clock: ctx.clock,
    random: ctx.random,
    ...(limiter && { limiter }),
    maxAttempts: 5,
    ...(ctx.attemptTimeoutMs !== undefined && { attemptTimeoutMs: ctx.attemptTimeoutMs }),
    // An open breaker means the upstream is down, not degraded: 90% of at least 50 calls
    // in 10 s failed. While open, the upstream gets nothing and drains what it queued; it
    // is probed every 2 s with 5 calls. Shared by every conversation, as the admission is.
    breaker: new CircuitBreaker({
      clock: ctx.clock,
      consecutiveFailures: 1_000_000,
      failureRatio: 0.9,
      minimumThroughput: 50,
      windowMs: 10_000,
      openMs: 2_000,
      halfOpenProbes: 5,
    }),
  });
}

/** Each turn a Run bounded by the user's patience: a call never outlives its user. A
 * subagent's calls run in a child of it (within its deadline and caps, behind it in a
 * rate limiter's queue). */
function runOf(ctx: StackContext, turn: TurnInfo, subagent?: number): Run {
  let run = turn.state.get("run") as Run | undefined;
  if (run === undefined) {
    run = new Run({
      clock: ctx.clock,
      deadlineMs: turn.patienceMs,
      maxAttempts: 16,
      id: `turn-${turn.id}`,
    });
    turn.state.set("run", run);
  }
  if (subagent === undefined) return run;
  const key = `subagent-${subagent}`;
  let child = turn.state.get(key) as Run | undefined;
  if (child === undefined) {
    child = run.child();
    turn.state.set(key, child);
  }
  return child;
}

/** Tool calls: W2's spec through guardTool, with idempotency keys and a budget of 0.1 per
 * call with a burst of 20, shared by every session. */
function chargeTool(ctx: StackContext) {
  const charge = guardTool(
    (args: { order: number }, tc) =>
      ctx.tool.call(args, { idempotencyKey: tc.idempotencyKey, signal: tc.signal }),
    {
      name: "charge",
      effect: "idempotent",
      budget: new RetryBudget({ maxTokens: 20, tokenRatio: 0.1 }),
      policy: { clock: ctx.clock, random: ctx.random, ...W2_DECORATOR, budget: undefined },
    },
  );
  return async (
    args: { order: number },
    { signal, turn }: { signal?: AbortSignal; turn: TurnInfo },
  ) => {
    const result = await charge(args, { run: runOf(ctx, turn), ...(signal && { signal }) });
    return (result as { status?: string }).status !== "error";
  };
}

/**
 * breakwater: one layer, its defaults. Up to 5 attempts with full jitter (0.5 s base, 8 s
 * cap), Retry-After honoured up to 30 s, retries admitted by the default adaptive
 * admission (they flow while the upstream accepts, and are cut when it saturates or stops
 * answering), a breaker for an upstream that is down, and each turn a Run bounded by the
 * user's patience. Tool calls go through guardTool with idempotency keys.
 */
export const breakwater: StormStack = {
  name: "breakwater",
  description: "one layer: adaptive admission, deadline, breaker, run limits",
  propagatesCancel: true,
  create: (ctx) => oneLayer(ctx, breakwaterPolicy(ctx)),
};

/** A breakwater stack's client: every model call through `p`, in the turn's run (a
 * subagent's in a child of it); `onHeaders` hears every answer's headers. */
function oneLayer(
  ctx: StackContext,
  p: Policy,
  onHeaders?: (h: Record<string, string>) => void,
): StackClient {
  return {
    model: (request, { signal, turn, subagent }) =>
      p.execute(
        (a) => ctx.provider.call(onHeaders ? { ...request, onHeaders } : request, a.signal),
        {
          run: runOf(ctx, turn, subagent),
          ...(signal && { signal }),
        },
      ),
    tool: chargeTool(ctx),
  };
}

/**
 * breakwater with a fallback: the same policy at the primary, and a second provider (another
 * region or vendor, healthy here) with its own policy, admission and breaker. A call moves on
 * when the primary cannot take it now (admission refused, breaker open, attempts used up on
 * transient failures), under one deadline, attempt cap and ledger per call.
 */
export const breakwaterFallback: StormStack = {
  name: "breakwater+fallback",
  description: "breakwater, then a second provider when the first cannot take the call",
  propagatesCancel: true,
  create: (ctx) => {
    const primary = breakwaterPolicy(ctx);
    const secondary = breakwaterPolicy(ctx);
    return {
      model: (req, { signal, turn, subagent }) =>
        fallback<Usage>([
          { name: "primary", policy: primary, call: (a) => ctx.provider.call(req, a.signal) },
          { name: "fallback", policy: secondary, call: (a) => ctx.fallback.call(req, a.signal) },
        ]).execute({ run: runOf(ctx, turn, subagent), ...(signal && { signal }) }),
      tool: chargeTool(ctx),
    };
  },
};

/**
 * breakwater with a rate limiter: the same policy, and every answer's rate-limit headers
 * fed to a `RateLimiter` (what the fetch layer does under an SDK), so calls wait for room
 * instead of meeting the 429, within their user's patience. Subagents' calls run in child
 * runs: behind their parent's, and fairly between turns.
 */
export const breakwaterLimiter: StormStack = {
  name: "breakwater+limiter",
  description: "breakwater, and a rate limiter fed by every answer's headers (180 in flight)",
  propagatesCancel: true,
  create: (ctx) => {
    // A cap on calls in flight at ~1.7x the ~104 of normal load: when the limit lifts,
    // the calls it held go out at the limit's pace without flooding the provider.
    const limiter = new RateLimiter({ clock: ctx.clock, maxConcurrent: 180 });
    const onHeaders = (h: Record<string, string>) => limiter.observeHeaders(h, ctx.clock.now());
    return oneLayer(ctx, breakwaterPolicy(ctx, limiter), onHeaders);
  },
};

/** The built-in stacks the storm compares. */
export const STACKS: readonly StormStack[] = [
  naive,
  openaiSdk,
  aiSdk,
  langchain,
  breakwater,
  breakwaterLimiter,
  breakwaterFallback,
];
