import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropicAdapter } from "../../src/providers/anthropic.ts";
import { withBreakwater as googleAdapter } from "../../src/providers/google.ts";
import { withBreakwater as langchainAdapter } from "../../src/providers/langchain.ts";
import { withBreakwater as openaiAdapter } from "../../src/providers/openai.ts";
import { Run } from "../../src/run/run.ts";
import type { FaultScript } from "../../src/testing/fault-server/script.ts";
import { testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();

/** How a call ends, the fault that makes it end so, and the reason breakwater gives. */
const ENDINGS = {
  deadline: {
    script: { rules: [{ headersDelayMs: 2_000 }] },
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
  "stream interrupted": {
    script: { rules: [{ stream: { after: 3, action: "cut" } }] },
    reason: "stream-interrupted",
    attempts: 1,
  },
  "an in-band error after content": {
    script: { rules: [{ stream: { after: 3, action: "error", error: "server_error" } }] },
    reason: "stream-interrupted",
    attempts: 1,
  },
  "a local refusal (the run's deadline has passed)": {
    script: {},
    reason: "run-deadline",
    attempts: 0,
  },
} satisfies Record<string, { script: FaultScript; reason: string; attempts: number }>;
type Ending = keyof typeof ENDINGS;

/** What a call is given: its signal (aborted 150 ms in for the caller's abort). */
function callSignal(ending: Ending): AbortSignal | undefined {
  if (ending !== "caller's abort") return undefined;
  const c = new AbortController();
  setTimeout(() => c.abort(), 150);
  return c.signal;
}

/** The policy of each case: a 400 ms deadline for the deadline case; for the local refusal,
 * a run whose deadline has passed (refused before anything is sent). */
const policyFor = (ending: Ending) =>
  testPolicy(ending === "deadline" ? { deadlineMs: 400 } : {}).p;
const streams = (ending: Ending) =>
  ending === "stream interrupted" || ending === "an in-band error after content";
/** The local refusal's run: its 1 ms deadline passed before the call (set by each test). */
let spent: Run | undefined;
const runFor = (ending: Ending) => (ending.startsWith("a local refusal") ? { run: spent } : {});

/** One call through each adapter; a stream is read to its end. Rejects as the SDK does. */
const ADAPTERS: Record<string, (ending: Ending) => Promise<unknown>> = {
  async openai(ending) {
    const client = openaiAdapter(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "t" }), {
      policy: policyFor(ending),
      ...runFor(ending),
    });
    const stream = streams(ending);
    const signal = callSignal(ending);
    const r = await client.chat.completions.create(
      { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream } as never,
      signal ? { signal } : undefined,
    );
    if (stream) for await (const _ of r as unknown as AsyncIterable<unknown>);
  },
  async anthropic(ending) {
    const client = anthropicAdapter(new Anthropic({ baseURL: fs.server.url, apiKey: "t" }), {
      policy: policyFor(ending),
      ...runFor(ending),
    });
    const stream = streams(ending);
    const signal = callSignal(ending);
    const r = await client.messages.create(
      {
        model: "claude-test",
        max_tokens: 64,
        messages: [{ role: "user", content: "hi" }],
        stream,
      } as never,
      signal ? { signal } : undefined,
    );
    if (stream) for await (const _ of r as unknown as AsyncIterable<unknown>);
  },
  async google(ending) {
    const ai = googleAdapter(
      new GoogleGenAI({
        apiKey: "AIza-test-0000000000000000",
        httpOptions: { baseUrl: fs.server.url },
      }),
      { policy: policyFor(ending), ...runFor(ending) },
    );
    const signal = callSignal(ending);
    const params = {
      model: "gemini-test",
      contents: "hi",
      ...(signal && { config: { abortSignal: signal } }),
    };
    if (streams(ending)) for await (const _ of await ai.models.generateContentStream(params));
    else await ai.models.generateContent(params);
  },
  async "ai-sdk"(ending) {
    const provider = createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "t" });
    const model = wrapLanguageModel({
      model: provider.chat("gpt-4o-mini"),
      middleware: breakwaterMiddleware({ policy: policyFor(ending), ...runFor(ending) }),
    });
    const signal = callSignal(ending);
    const options = { model, prompt: "hi", maxRetries: 0, ...(signal && { abortSignal: signal }) };
    if (!streams(ending)) return generateText(options);
    let failure: unknown;
    const r = streamText({ ...options, onError: ({ error }) => void (failure = error) });
    for await (const _ of r.fullStream);
    if (failure !== undefined) throw failure;
  },
  async langchain(ending) {
    const model = langchainAdapter(
      new ChatOpenAI({
        model: "gpt-4o-mini",
        apiKey: "t",
        configuration: { baseURL: `${fs.server.url}/v1` },
      }),
      { policy: policyFor(ending), ...runFor(ending) },
    );
    const signal = callSignal(ending);
    if (streams(ending)) {
      for await (const _ of await model.stream("hi", signal ? { signal } : undefined));
    } else await model.invoke("hi", signal ? { signal } : undefined);
  },
};

/** The class each ending arrives as, per adapter: the SDK's own where the SDK raises one
 * (the README's table of reasons says the same). */
const CLASSES: Record<string, Record<Ending, string>> = {
  openai: {
    deadline: "APIConnectionTimeoutError",
    "caller's abort": "APIUserAbortError",
    "attempts exhausted": "InternalServerError",
    "not retryable": "BadRequestError",
    "stream interrupted": "BreakwaterError",
    "an in-band error after content": "APIError",
    "a local refusal (the run's deadline has passed)": "APIConnectionError",
  },
  anthropic: {
    deadline: "APIConnectionTimeoutError",
    "caller's abort": "APIUserAbortError",
    "attempts exhausted": "ServiceUnavailableError",
    "not retryable": "BadRequestError",
    "stream interrupted": "BreakwaterError",
    "an in-band error after content": "APIError",
    "a local refusal (the run's deadline has passed)": "APIConnectionError",
  },
  google: {
    deadline: "BreakwaterError",
    "caller's abort": "DOMException",
    "attempts exhausted": "ApiError",
    "not retryable": "ApiError",
    "stream interrupted": "BreakwaterError",
    "an in-band error after content": "BreakwaterError",
    "a local refusal (the run's deadline has passed)": "BreakwaterError",
  },
  "ai-sdk": {
    deadline: "BreakwaterError",
    "caller's abort": "DOMException",
    "attempts exhausted": "APICallError",
    "not retryable": "APICallError",
    "stream interrupted": "BreakwaterError",
    "an in-band error after content": "BreakwaterError",
    "a local refusal (the run's deadline has passed)": "BreakwaterError",
  },
  langchain: {
    deadline: "BreakwaterError",
    "caller's abort": "DOMException",
    "attempts exhausted": "InternalServerError",
    "not retryable": "BadRequestError",
    "stream interrupted": "BreakwaterError",
    "an in-band error after content": "BreakwaterError",
    "a local refusal (the run's deadline has passed)": "BreakwaterError",
  },
};

describe("every way a call ends, through every adapter: reasonOf and ledgerOf on the SDK's own error", () => {
  for (const [adapter, call] of Object.entries(ADAPTERS))
    for (const [ending, expected] of Object.entries(ENDINGS) as [
      Ending,
      (typeof ENDINGS)[Ending],
    ][])
      it(`${adapter}: ${ending}`, async () => {
        fs.script(expected.script);
        spent = new Run({ deadlineMs: 1 });
        await new Promise((r) => setTimeout(r, 5));
        const error = await call(ending).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, "the call fails").toBeInstanceOf(Error);
        const name = (error as Error).constructor.name;
        expect(name).toBe(CLASSES[adapter]![ending]);
        expect(reasonOf(error), `reasonOf on ${name}`).toBe(expected.reason);
        expect(ledgerOf(error)?.attempts.length, `ledgerOf on ${name}`).toBe(expected.attempts);
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
