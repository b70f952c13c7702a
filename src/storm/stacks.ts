import {
  durableStep,
  fallback,
  guardTool,
  type Policy,
  type PolicyOptions,
  policy,
  Run,
  type StepState,
  type Usage,
} from "../index.ts";
import { AiFallbackModel, aiFallbackCall } from "./peers/ai-fallback.ts";
import { AI_RETRY, AI_RETRY_FALLBACK, aiRetryCall } from "./peers/ai-retry.ts";
import { AI_SDK } from "./peers/ai-sdk.ts";
import { RESTATE_RUN, TEMPORAL_ACTIVITY } from "./peers/engines.ts";
import {
  ASYNC_CALLER_ONCE,
  LANGCHAIN,
  LANGCHAIN_V1_RETRY,
  LANGCHAIN_V1_RETRY_OVER_FALLBACK,
} from "./peers/langchain.ts";
import { type PeerLayer, runLayers } from "./peers/layers.ts";
import { LiteLLMDeployment, litellmGroupCall, litellmWithFallback } from "./peers/litellm.ts";
import { NAIVE } from "./peers/naive.ts";
import { OPENAI_AGENTS, openaiAgentsClient } from "./peers/openai-agents.ts";
import { OPENAI_NODE, OPENAI_NODE_7 } from "./peers/openai-node.ts";
import type { SimRequest, StackClient, StackContext, StormStack, TurnInfo } from "./types.ts";

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

/** What a peer's model call is handed: the loop's time, randomness and the app's
 * per-attempt timeout. */
type Loop = { clock: StackContext["clock"]; random: () => number; timeoutMs?: number | undefined };

/** A peer stack: its own model-call loop (`model`); tool calls through W2's decorator,
 * inside `toolOuter` (layers that rerun the tool call from outside), if any. */
function peerWith(
  ctx: StackContext,
  model: (request: SimRequest, signal: AbortSignal | undefined, loop: Loop) => Promise<Usage>,
  toolOuter: PolicyOptions[] = [],
): StackClient {
  const loop = { clock: ctx.clock, random: ctx.random, timeoutMs: ctx.attemptTimeoutMs };
  const toolPolicies = [...toolOuter, W2_DECORATOR].map((o) =>
    policy({ clock: ctx.clock, random: ctx.random, ...o }),
  );
  return {
    model: (request, { signal }) => model(request, signal, loop),
    tool: (args, { signal }) =>
      nest(toolPolicies, signal, (s) => ctx.tool.call(args, s ? { signal: s } : {})).then(
        () => true,
        () => false,
      ),
  };
}

/** A peer stack whose model calls run inside `layers`, outermost first. */
const peer = (ctx: StackContext, layers: readonly PeerLayer[], toolOuter?: PolicyOptions[]) =>
  peerWith(
    ctx,
    (request, signal, loop) =>
      runLayers(layers, loop, signal, (s) => ctx.provider.call(request, s)),
    toolOuter,
  );

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
  description: "LangChain.js core 1.4: 7 attempts, (1+U)·1 s doubling; a 429 needs a hint",
  // ChatOpenAI passes the caller's signal into each request (peers.ts).
  propagatesCancel: true,
  create: (ctx) => peer(ctx, [LANGCHAIN]),
};

/** LangChain v1's agent: `createAgent({ middleware: [modelRetryMiddleware()] })`. */
export const langchainV1: StormStack = {
  name: "langchain-v1",
  description:
    "LangChain.js v1 modelRetryMiddleware: 3 attempts, 1 s doubling ±25%, the model's own retries off",
  propagatesCancel: true,
  create: (ctx) => peer(ctx, [LANGCHAIN_V1_RETRY, ASYNC_CALLER_ONCE]),
};

/** The same agent with `modelFallbackMiddleware(secondProvider)` inside the retry. */
export const langchainV1Fallback: StormStack = {
  name: "langchain-v1+fallback",
  description:
    "LangChain.js v1 modelRetry over modelFallback: each of 3 attempts the primary, then the second provider",
  propagatesCancel: true,
  fallback: true,
  create: (ctx) =>
    peerWith(ctx, (request, signal, loop) => {
      // The app's timeout is each request's (the middleware sets none of its own).
      const middleware = { clock: loop.clock, random: loop.random };
      const once = (p: typeof ctx.provider, s: AbortSignal | undefined) =>
        runLayers([ASYNC_CALLER_ONCE], loop, s, (s2) => p.call(request, s2));
      return runLayers([LANGCHAIN_V1_RETRY_OVER_FALLBACK], middleware, signal, (s) =>
        once(ctx.provider, s).catch((e: unknown) => {
          // ChatOpenAI's _generate checks the signal first: nothing is sent after an abort.
          if (s?.aborted) throw e;
          return once(ctx.fallback, s);
        }),
      );
    }),
};

/** ai-retry's README setup: retry the same model on retryable errors, 2 s, once. */
export const aiRetry: StormStack = {
  name: "ai-retry",
  description: "ai-retry 2.4: error.isRetryable(true).retry({ delay: 1 s, ×2 }): 2 attempts",
  propagatesCancel: true,
  create: (ctx) =>
    peerWith(ctx, (request, signal, loop) =>
      aiRetryCall(AI_RETRY, loop, signal, [(s) => ctx.provider.call(request, s)]),
    ),
};

/** ai-retry with the second provider: a switch on overload, the retry, a plain fallback. */
export const aiRetryFallback: StormStack = {
  name: "ai-retry+fallback",
  description:
    "ai-retry 2.4: 529 or 'overloaded' switches, retryable errors retry once, the rest falls back once",
  propagatesCancel: true,
  fallback: true,
  create: (ctx) =>
    peerWith(ctx, (request, signal, loop) =>
      aiRetryCall(AI_RETRY_FALLBACK, loop, signal, [
        (s) => ctx.provider.call(request, s),
        (s) => ctx.fallback.call(request, s),
      ]),
    ),
};

/** ai-fallback's README setup: one `createFallback` model over the primary and the second
 * provider, shared by the app's calls, under `generateText`'s own retries. */
export const aiFallback: StormStack = {
  name: "ai-fallback+fallback",
  description:
    "ai-fallback 3.0: createFallback([primary, second]) under generateText's 3 attempts; 401/403/408/409/413/429/5xx or the words switch; back to the primary at most every 3 min",
  propagatesCancel: true,
  fallback: true,
  create: (ctx) => {
    const model = new AiFallbackModel(ctx.clock, 2);
    return peerWith(ctx, (request, signal, loop) =>
      aiFallbackCall(model, loop, signal, [
        (s) => ctx.provider.call(request, s),
        (s) => ctx.fallback.call(request, s),
      ]),
    );
  },
};

/** The OpenAI Agents SDK's runner retries, as its docs set them, over its openai client. */
export const openaiAgents: StormStack = {
  name: "openai-agents",
  description:
    "OpenAI Agents SDK 0.20, the documented retry policy: 5 runner attempts over the client's own 3",
  propagatesCancel: true,
  create: (ctx) =>
    peerWith(ctx, (request, signal, loop) => {
      let attempt = 0;
      const client = (s: AbortSignal | undefined) =>
        runLayers([openaiAgentsClient(attempt++)], loop, s, (s2) => ctx.provider.call(request, s2));
      return runLayers([OPENAI_AGENTS], { clock: loop.clock, random: loop.random }, signal, client);
    }),
};

/** LiteLLM's Router with its defaults, one deployment. */
export const litellmRouter: StormStack = {
  name: "litellm-router",
  description: "LiteLLM Router 1.80: 3 attempts, 0.5 s doubling + U(0, 0.75 s), Retry-After ≤ 60 s",
  propagatesCancel: true,
  create: (ctx) => {
    const deployment = new LiteLLMDeployment();
    return peerWith(ctx, (request, signal, loop) =>
      litellmGroupCall(deployment, loop, signal, (s) => ctx.provider.call(request, s)),
    );
  },
};

/** LiteLLM's Router with `fallbacks` to the second provider's group. */
export const litellmRouterFallback: StormStack = {
  name: "litellm-router+fallback",
  description: "LiteLLM Router 1.80: the primary's 3 attempts, then the fallback group's 3",
  propagatesCancel: true,
  fallback: true,
  create: (ctx) => {
    const groups = [new LiteLLMDeployment(), new LiteLLMDeployment()] as const;
    return peerWith(ctx, (request, signal, loop) =>
      litellmWithFallback(groups, loop, signal, [
        (s) => ctx.provider.call(request, s),
        (s) => ctx.fallback.call(request, s),
      ]),
    );
  },
};

/**
 * breakwater as a user gets it: `policy()` with nothing but the simulation's clock and
 * random source (and the app's attempt timeout, which every stack is given), its every
 * other number its own default. Each turn is a Run whose deadline is the user's patience:
 * the one thing a user must tell us.
 */
export function breakwaterPolicy(ctx: StackContext): Policy {
  return policy({
    clock: ctx.clock,
    random: ctx.random,
    ...(ctx.attemptTimeoutMs !== undefined && { attemptTimeoutMs: ctx.attemptTimeoutMs }),
  });
}

/** Each turn a Run bounded by the user's patience: a call never outlives its user. A
 * subagent's calls run in a child of it (within its deadline, behind it in a rate
 * limiter's queue). */
function runOf(ctx: StackContext, turn: TurnInfo, subagent?: number): Run {
  let run = turn.state.get("run") as Run | undefined;
  if (run === undefined) {
    run = new Run({ clock: ctx.clock, deadlineMs: turn.patienceMs, id: `turn-${turn.id}` });
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

/** Tool calls through guardTool with its defaults: the charge is idempotent (a key per
 * call, the one thing the tool's author must say). */
function chargeTool(ctx: StackContext) {
  const charge = guardTool(
    (args: { order: number }, tc) =>
      ctx.tool.call(args, { idempotencyKey: tc.idempotencyKey, signal: tc.signal }),
    { name: "charge", effect: "idempotent", policy: { clock: ctx.clock, random: ctx.random } },
  );
  return async (
    args: { order: number },
    { signal, turn }: { signal?: AbortSignal; turn: TurnInfo },
  ) => {
    const result = await charge(args, { run: runOf(ctx, turn), ...(signal && { signal }) });
    return (result as { status?: string }).status !== "error";
  };
}

/** What the fetch layer does under an SDK: every answer's rate-limit headers (errors
 * too) told to the policy's rate limiter. */
const feeding = (ctx: StackContext, p: Policy) => (h: Record<string, string>) =>
  p.options.limiter?.observeHeaders(h, ctx.clock.now());

/** A breakwater stack's client: every model call through `p`, in the turn's run (a
 * subagent's in a child of it), its answers' headers fed to the policy's limiter, its
 * first token told to the attempt (a stream's first content, for a hedge race). */
function oneLayer(ctx: StackContext, p: Policy): StackClient {
  const onHeaders = feeding(ctx, p);
  return {
    model: (request, { signal, turn, subagent }) =>
      p.execute(
        (a) =>
          ctx.provider.call({ ...request, onHeaders, onFirstToken: () => a.answering() }, a.signal),
        {
          run: runOf(ctx, turn, subagent),
          ...(signal && { signal }),
        },
      ),
    tool: chargeTool(ctx),
  };
}

/**
 * breakwater: the defaults, one layer. What `withBreakwater(client)` gives with no
 * options, with a deadline per turn equal to the user's patience.
 */
export const breakwater: StormStack = {
  name: "breakwater",
  description: "the defaults: policy() and a deadline per turn",
  propagatesCancel: true,
  create: (ctx) => oneLayer(ctx, breakwaterPolicy(ctx)),
};

/** breakwater with hedged first tokens: the defaults and `hedge: true` (after the p95 of
 * recent first-content times, at most 5% more requests, standing down under overload). */
export const breakwaterHedge: StormStack = {
  name: "breakwater+hedge",
  description: "the defaults and hedge: true (p95 of first-token times, at most 5% more)",
  propagatesCancel: true,
  create: (ctx) =>
    oneLayer(
      ctx,
      policy({
        clock: ctx.clock,
        random: ctx.random,
        hedge: true,
        ...(ctx.attemptTimeoutMs !== undefined && { attemptTimeoutMs: ctx.attemptTimeoutMs }),
      }),
    ),
};

/**
 * breakwater with a fallback: the defaults at the primary, and a second provider (another
 * region or vendor, healthy here) with its own default policy. A call moves on when the
 * primary cannot take it now, under one deadline, attempt cap and ledger per call.
 */
export const breakwaterFallback: StormStack = {
  name: "breakwater+fallback",
  description: "the defaults, and a second provider when the first cannot take the call",
  propagatesCancel: true,
  fallback: true,
  create: (ctx) => {
    const primary = breakwaterPolicy(ctx);
    const secondary = breakwaterPolicy(ctx);
    const onPrimary = feeding(ctx, primary);
    const onSecondary = feeding(ctx, secondary);
    return {
      model: (req, { signal, turn, subagent }) =>
        fallback<Usage>([
          {
            name: "primary",
            policy: primary,
            call: (a) => ctx.provider.call({ ...req, onHeaders: onPrimary }, a.signal),
          },
          {
            name: "fallback",
            policy: secondary,
            call: (a) => ctx.fallback.call({ ...req, onHeaders: onSecondary }, a.signal),
          },
        ]).execute({ run: runOf(ctx, turn, subagent), ...(signal && { signal }) }),
      tool: chargeTool(ctx),
    };
  },
};

/** Temporal's activity retry over the tool decorator: every failure, 1 s doubling to 100 s,
 * no limit (TEMPORAL_ACTIVITY). */
const TEMPORAL_TOOL: PolicyOptions = {
  maxAttempts: Number.POSITIVE_INFINITY,
  backoff: { baseMs: 1_000, capMs: 100_000, jitter: "none" },
  budget: false,
  classify: () => ({ kind: "unknown", retryable: true }),
};

/** A peer stack inside a durable engine: the model call in `layers` (the engine's outermost),
 * the tool call in the engine's step retry over W2's decorator. The engine's steps go on
 * after the user left: nothing the user does reaches them. */
const inEngine = (ctx: StackContext, layers: readonly PeerLayer[], tool: PolicyOptions[]) =>
  peerWith(
    ctx,
    (request, _signal, loop) =>
      runLayers(layers, loop, undefined, (s) => ctx.provider.call(request, s)),
    tool,
  );

/** Temporal as teams write it: the openai SDK's own retries inside the default activity
 * policy (unlimited attempts, 1 s doubling to 100 s, every error). */
export const temporalAsWritten: StormStack = {
  name: "temporal+openai-sdk",
  description:
    "an activity with Temporal's default RetryPolicy (unlimited, 1 s doubling to 100 s) around openai-node 7's 3 attempts",
  propagatesCancel: false,
  engine: true,
  create: (ctx) => inEngine(ctx, [TEMPORAL_ACTIVITY, OPENAI_NODE_7], [TEMPORAL_TOOL]),
};

/** Restate as its AI guide composes it: the AI SDK's retries over `ctx.run`'s three. */
export const restateAsWritten: StormStack = {
  name: "restate+ai-sdk",
  description:
    "the AI SDK's 3 attempts over durableCalls' ctx.run with maxRetryAttempts 3 (50 ms doubling): 9 requests a call",
  propagatesCancel: false,
  engine: true,
  create: (ctx) =>
    inEngine(
      ctx,
      [AI_SDK, RESTATE_RUN],
      [
        {
          ...TEMPORAL_TOOL,
          maxAttempts: 3,
          backoff: { baseMs: 50, capMs: 10_000, jitter: "none" },
        },
      ],
    ),
};

/**
 * breakwater inside a durable engine, through the mapping: each model call a durable step
 * (`durableStep`, the defaults, a wait past 5 s performed by the engine's timer between
 * legs), a final give-up ending the step; each turn a Run bounded by the user's patience.
 */
export const breakwaterEngine: StormStack = {
  name: "breakwater+engine",
  description:
    "the defaults as durable steps: waits past 5 s in the engine's timer, nothing retried twice",
  propagatesCancel: true,
  engine: true,
  create: (ctx) => {
    const p = breakwaterPolicy(ctx);
    const onHeaders = feeding(ctx, p);
    return {
      model: async (request, { signal, turn, subagent }) => {
        const call = { run: runOf(ctx, turn, subagent), ...(signal && { signal }) };
        let state: StepState | undefined;
        for (;;) {
          const leg = await durableStep(
            p,
            (a) =>
              ctx.provider.call(
                { ...request, onHeaders, onFirstToken: () => a.answering() },
                a.signal,
              ),
            { ...call, state },
          );
          if (leg.ok) return leg.value;
          state = leg.state;
          await ctx.clock.sleep(leg.waitMs, signal); // the engine's timer
        }
      },
      tool: chargeTool(ctx),
    };
  },
};

/** The built-in stacks the storm compares: those with one upstream, then those that fall
 * back to a second provider, then those inside a durable engine (each group compared
 * within itself). */
export const STACKS: readonly StormStack[] = [
  naive,
  openaiSdk,
  aiSdk,
  langchain,
  langchainV1,
  aiRetry,
  openaiAgents,
  litellmRouter,
  breakwater,
  breakwaterHedge,
  langchainV1Fallback,
  aiRetryFallback,
  aiFallback,
  litellmRouterFallback,
  breakwaterFallback,
  temporalAsWritten,
  restateAsWritten,
  breakwaterEngine,
];
