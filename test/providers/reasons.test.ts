import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { GIVE_UP_REASONS, type GiveUpReason, ledgerOf, reasonOf } from "../../src/core/errors.ts";
import type { PolicyOptions } from "../../src/policy/options.ts";
import type { Policy } from "../../src/policy/policy.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropicAdapter } from "../../src/providers/anthropic.ts";
import { withBreakwater as googleAdapter } from "../../src/providers/google.ts";
import { withBreakwater as langchainAdapter } from "../../src/providers/langchain.ts";
import { withBreakwater as openaiAdapter } from "../../src/providers/openai.ts";
import { Run, type RunOptions } from "../../src/run/run.ts";
import type { FaultScript } from "../../src/testing/fault-server/script.ts";
import { guardTool } from "../../src/tools/guard-tool.ts";
import { testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();

/** A call the case makes first (its answer ignored), through the same adapter, policy and
 * run: what leaves the breaker open, the limiter without room or the run spent. */
type Before = { script: FaultScript } | { tool: true };

/** How a call ends, the fault that makes it end so, the policy and run it is made under,
 * and the reason breakwater gives. */
interface Ending {
  script: FaultScript;
  reason: GiveUpReason;
  attempts: number;
  policy?: PolicyOptions;
  run?: RunOptions;
  before?: Before;
  stream?: boolean;
}
const REFUSE_RETRIES = { onRetry: () => false } satisfies PolicyOptions;
const ENDINGS = {
  deadline: {
    script: { rules: [{ headersDelayMs: 2_000 }] },
    policy: { deadlineMs: 400 },
    reason: "deadline",
    attempts: 1,
  },
  "caller's abort": {
    script: { rules: [{ headersDelayMs: 2_000 }] },
    reason: "cancelled",
    attempts: 1,
  },
  "attempts exhausted": {
    script: { rules: [{ status: 503 }] },
    reason: "attempts-exhausted",
    attempts: 3,
  },
  "not retryable": {
    script: { rules: [{ status: 400 }] },
    reason: "not-retryable",
    attempts: 1,
  },
  "a retry vetoed by onRetry": {
    script: { rules: [{ status: 503 }] },
    policy: REFUSE_RETRIES,
    reason: "vetoed",
    attempts: 1,
  },
  "every attempt timed out": {
    // Long enough that each attempt's request reaches the server before it is cut, on a
    // loaded machine too (cut before it is written, a request is never seen there).
    script: { rules: [{ headersDelayMs: 5_000 }] },
    policy: { attemptTimeoutMs: 400, maxAttempts: 2 },
    reason: "attempt-timeout",
    attempts: 2,
  },
  "a Retry-After past the cap": {
    script: { rules: [{ status: 429, retryAfter: 100 }] },
    reason: "retry-after-too-long",
    attempts: 1,
  },
  "stream interrupted": {
    script: { rules: [{ stream: { after: 3, action: "cut" } }] },
    reason: "stream-interrupted",
    attempts: 1,
    stream: true,
  },
  "an in-band error after content": {
    script: { rules: [{ stream: { after: 3, action: "error", error: "server_error" } }] },
    reason: "stream-interrupted",
    attempts: 1,
    stream: true,
  },
  "a retry the budget refuses": {
    script: { rules: [{ status: 503 }] },
    policy: { budget: { maxTokens: 1 } },
    reason: "budget",
    attempts: 2,
  },
  "an open breaker (a local refusal)": {
    before: { script: { rules: [{ status: 503 }] } },
    script: {},
    policy: { breaker: { consecutiveFailures: 3 } },
    reason: "circuit-open",
    attempts: 0,
  },
  "a retry refused by the breaker a timed-out attempt opened": {
    script: { rules: [{ headersDelayMs: 2_000 }] },
    policy: { attemptTimeoutMs: 100, breaker: { consecutiveFailures: 1 } },
    reason: "circuit-open",
    attempts: 1,
  },
  "the limits learned from the headers leave no room in time (a local refusal)": {
    before: { script: { rateLimit: { requestsPerMinute: 1 } } },
    script: { rateLimit: { requestsPerMinute: 1 } },
    policy: { deadlineMs: 2_000 },
    reason: "rate-limit-wait",
    attempts: 0,
  },
  "the run's deadline has passed (a local refusal)": {
    script: {},
    run: { deadlineMs: 1 },
    reason: "run-deadline",
    attempts: 0,
  },
  "the run's attempts spent": {
    script: { rules: [{ status: 503 }] },
    run: { maxAttempts: 1 },
    reason: "run-attempts",
    attempts: 1,
  },
  "the run's tokens spent (a local refusal)": {
    before: { script: {} },
    script: {},
    run: { maxTokens: 5 },
    reason: "run-tokens",
    attempts: 0,
  },
  "the run's tool failures at their cap (a local refusal)": {
    before: { tool: true },
    script: {},
    run: { maxToolFailures: 1 },
    reason: "run-tool-failures",
    attempts: 0,
  },
} satisfies Record<string, Ending>;
type Name = keyof typeof ENDINGS;
const endingOf = (name: Name): Ending => ENDINGS[name];

/** The reasons walked elsewhere, with the test that walks them through the adapters: each
 * needs a shape of call the walk above does not make. */
const ELSEWHERE: Partial<Record<GiveUpReason, string>> = {
  deferred:
    "test/policy/durable-step.test.ts and test/engines/ (a durable engine's step hands its long waits over; no adapter call asks for it)",
  "outcome-unknown": "replay.test.ts (a stored conversation's turn timed out after it was sent)",
  "pool-cooldown": "test/policy/pool.test.ts (a pool is a policy of deployments, not an adapter's)",
  "run-retry-share": "test/run/run.test.ts (a share of tokens wasted on retries)",
};

/** What a call is given: its signal (aborted 150 ms in for the caller's abort). */
function callSignal(name: Name): AbortSignal | undefined {
  if (name !== "caller's abort") return undefined;
  const c = new AbortController();
  setTimeout(() => c.abort(), 150);
  return c.signal;
}

/** One case's policy and run, made once for the call it makes first and the call itself. */
interface Setup {
  policy: Policy;
  run?: Run;
  stream: boolean;
  signal?: AbortSignal | undefined;
}
const setupOf = (e: Ending): Setup => ({
  policy: testPolicy(e.policy).p,
  ...(e.run && { run: new Run(e.run) }),
  stream: e.stream === true,
});
const wrapWith = (s: Setup) => ({ policy: s.policy, ...(s.run && { run: s.run }) });

const MESSAGES = [{ role: "user" as const, content: "hi" }];
const requestOf = (s: Setup) => (s.signal ? { signal: s.signal } : undefined);
/** A Stainless SDK's answer, its stream read to the end. */
async function readToEnd(s: Setup, answer: PromiseLike<unknown>): Promise<void> {
  const r = await answer;
  if (s.stream) for await (const _ of r as AsyncIterable<unknown>);
}

/** One call through each adapter; a stream is read to its end. Rejects as the SDK does. */
const ADAPTERS: Record<string, (s: Setup) => Promise<unknown>> = {
  async openai(s) {
    const client = openaiAdapter(
      new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "t" }),
      wrapWith(s),
    );
    const params = { model: "gpt-4o-mini", messages: MESSAGES, stream: s.stream };
    await readToEnd(s, client.chat.completions.create(params as never, requestOf(s)));
  },
  async anthropic(s) {
    const client = anthropicAdapter(
      new Anthropic({ baseURL: fs.server.url, apiKey: "t" }),
      wrapWith(s),
    );
    const params = { model: "claude-test", max_tokens: 64, messages: MESSAGES, stream: s.stream };
    await readToEnd(s, client.messages.create(params as never, requestOf(s)));
  },
  async google(s) {
    const ai = googleAdapter(
      new GoogleGenAI({
        apiKey: "AIza-test-0000000000000000",
        httpOptions: { baseUrl: fs.server.url },
      }),
      wrapWith(s),
    );
    const params = {
      model: "gemini-test",
      contents: "hi",
      ...(s.signal && { config: { abortSignal: s.signal } }),
    };
    if (s.stream) for await (const _ of await ai.models.generateContentStream(params));
    else await ai.models.generateContent(params);
  },
  async "ai-sdk"(s) {
    const provider = createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "t" });
    const model = wrapLanguageModel({
      model: provider.chat("gpt-4o-mini"),
      middleware: breakwaterMiddleware(wrapWith(s)),
    });
    const options = {
      model,
      prompt: "hi",
      maxRetries: 0,
      ...(s.signal && { abortSignal: s.signal }),
    };
    if (!s.stream) return generateText(options);
    let failure: unknown;
    const r = streamText({ ...options, onError: ({ error }) => void (failure = error) });
    for await (const _ of r.fullStream);
    if (failure !== undefined) throw failure;
  },
  async langchain(s) {
    const model = langchainAdapter(
      new ChatOpenAI({
        model: "gpt-4o-mini",
        apiKey: "t",
        configuration: { baseURL: `${fs.server.url}/v1` },
      }),
      wrapWith(s),
    );
    const options = s.signal ? { signal: s.signal } : undefined;
    if (s.stream) for await (const _ of await model.stream("hi", options));
    else await model.invoke("hi", options);
  },
};

/** Makes a case's first call (its outcome ignored): a call under its script, or a tool
 * failure counted on the run. */
async function before(adapter: string, b: Before, s: Setup): Promise<void> {
  if ("tool" in b) {
    const t = guardTool(
      async () => {
        throw Object.assign(new Error("bad"), { status: 400 });
      },
      { name: "t", effect: "read", ...(s.run && { run: s.run }) },
    );
    await t({});
    return;
  }
  fs.script(b.script);
  await ADAPTERS[adapter]!({ ...s, stream: false }).catch(() => {});
}

/** The class a provider's own failure arrives as, per adapter: the SDK's own where it
 * raises one (a 503, a 400, a 429). */
const SDK = {
  openai: { 503: "InternalServerError", 400: "BadRequestError", 429: "RateLimitError" },
  anthropic: { 503: "ServiceUnavailableError", 400: "BadRequestError", 429: "RateLimitError" },
  google: { 503: "ApiError", 400: "ApiError", 429: "ApiError" },
  "ai-sdk": { 503: "APICallError", 400: "APICallError", 429: "APICallError" },
  langchain: { 503: "InternalServerError", 400: "BadRequestError", 429: "RateLimitError" },
} as const;
type Adapter = keyof typeof SDK;
const STAINLESS = (a: Adapter) => a === "openai" || a === "anthropic";
/** The adapters that retry above the model call (not in its fetch): a refusal of theirs
 * after an answer is a BreakwaterError whose `cause` is the SDK's error for the answer. */
const ABOVE = (a: Adapter) => a === "ai-sdk" || a === "langchain";

/** The class each ending arrives as through `adapter` (the table of reasons in docs/errors.md says
 * the same). A refusal before anything is sent is a BreakwaterError everywhere; a timeout
 * and an abort are the Stainless SDKs' own words for them; a provider's answer is the SDK's
 * class, and so is a retry refused after it where the adapter is the SDK's fetch. */
function classOf(adapter: Adapter, name: Name): string {
  const sdk = SDK[adapter];
  switch (name) {
    case "deadline":
    case "every attempt timed out":
      return STAINLESS(adapter) ? "APIConnectionTimeoutError" : "BreakwaterError";
    case "caller's abort":
      return STAINLESS(adapter) ? "APIUserAbortError" : "DOMException";
    case "attempts exhausted":
    case "a retry vetoed by onRetry":
      return sdk[503];
    case "a retry the budget refuses":
    case "the run's attempts spent":
      return ABOVE(adapter) ? "BreakwaterError" : sdk[503];
    case "not retryable":
      return sdk[400];
    case "a Retry-After past the cap":
      return ABOVE(adapter) ? "BreakwaterError" : sdk[429];
    case "an in-band error after content":
      return STAINLESS(adapter) ? "APIError" : "BreakwaterError";
    default:
      return "BreakwaterError";
  }
}

describe("every way a call ends, through every adapter: reasonOf and ledgerOf on the error it arrives as", () => {
  it("every reason is walked here, or by the test named for it", () => {
    const walked = new Set<GiveUpReason>(Object.values(ENDINGS).map((e) => e.reason));
    const missing = GIVE_UP_REASONS.filter((r) => !walked.has(r) && !(r in ELSEWHERE));
    expect(missing).toEqual([]);
  });

  for (const adapter of Object.keys(ADAPTERS) as Adapter[])
    for (const name of Object.keys(ENDINGS) as Name[])
      it(`${adapter}: ${name}`, async () => {
        const e = endingOf(name);
        const s = setupOf(e);
        if (e.before) await before(adapter, e.before, s);
        fs.script(e.script);
        const sent = fs.requests();
        if (e.run?.deadlineMs !== undefined) await new Promise((r) => setTimeout(r, 5));
        const error = await ADAPTERS[adapter]!({ ...s, signal: callSignal(name) }).then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(error, "the call fails").toBeInstanceOf(Error);
        const cls = (error as Error).constructor.name;
        expect([cls, reasonOf(error)]).toEqual([classOf(adapter, name), e.reason]);
        expect(ledgerOf(error)?.attempts.length, `ledgerOf on ${cls}`).toBe(e.attempts);
        // A request cut as it went out may reach the server a moment after the call ended.
        for (let i = 0; i < 50 && fs.requests() - sent < e.attempts; i++)
          await new Promise((r) => setTimeout(r, 20));
        expect(fs.requests() - sent, "requests sent").toBe(e.attempts);
      });
});

describe("the .stream() helpers: the SDK's classes, the reason on each", () => {
  it.each([
    ["cut", "OpenAIError", "AnthropicError"],
    ["error", "APIError", "APIError"],
  ] as const)("a stream %s after content", async (action, openaiClass, anthropicClass) => {
    fs.script({ rules: [{ stream: { after: 3, action } }] });
    const oa = openaiAdapter(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "t" }), {
      policy: testPolicy().p,
    });
    const messages = [{ role: "user" as const, content: "hi" }];
    const e = await oa.chat.completions
      .stream({ model: "m", messages })
      .finalChatCompletion()
      .catch((x: unknown) => x);
    expect([(e as Error).constructor.name, reasonOf(e)]).toEqual([
      openaiClass,
      "stream-interrupted",
    ]);
    const an = anthropicAdapter(new Anthropic({ baseURL: fs.server.url, apiKey: "t" }), {
      policy: testPolicy().p,
    });
    const f = await an.messages
      .stream({ model: "m", max_tokens: 9, messages })
      .finalMessage()
      .catch((x: unknown) => x);
    expect([(f as Error).constructor.name, reasonOf(f)]).toEqual([
      anthropicClass,
      "stream-interrupted",
    ]);
  });
});
