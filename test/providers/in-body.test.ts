import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { ChatAnthropic } from "@langchain/anthropic";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { failureOf, ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropicWith } from "../../src/providers/anthropic.ts";
import { withBreakwater as googleWith } from "../../src/providers/google.ts";
import { withBreakwater as langchainWith } from "../../src/providers/langchain.ts";
import { withBreakwater as openaiWith } from "../../src/providers/openai.ts";
import type { FaultRule } from "../../src/testing/fault-server/script.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

// A 200 whose JSON body is an error (`{ "error": { ... } }`, as gateways and some providers
// send): a failure to every gate, retried when transient, and the SDK's own error class on
// a give-up, on every adapter that reads the answer.
const fs = useFaultServer();
const hi = [{ role: "user" as const, content: "hi" }];

/** One JSON call's text, through each adapter. */
const ADAPTERS: Record<string, () => Promise<string>> = {
  "openai chat": async () => {
    const c = openaiWith(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    return (await c.chat.completions.create({ model: "m", messages: hi })).choices[0]!.message
      .content!;
  },
  "openai Responses": async () => {
    const c = openaiWith(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    return (await c.responses.create({ model: "m", input: "hi" })).output_text;
  },
  anthropic: async () => {
    const c = anthropicWith(new Anthropic({ baseURL: fs.server.url, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    const m = await c.messages.create({ model: "m", max_tokens: 64, messages: hi });
    return m.content.map((b) => (b.type === "text" ? b.text : "")).join("");
  },
  google: async () => {
    const g = new GoogleGenAI({ apiKey: "k", httpOptions: { baseUrl: fs.server.url } });
    const c = googleWith(g, { policy: testPolicy().p });
    return (await c.models.generateContent({ model: "gemini-test", contents: "hi" })).text ?? "";
  },
  "AI SDK": async () => {
    const model = wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" }).chat("m"),
      middleware: breakwaterMiddleware({ policy: testPolicy().p }),
    });
    return (await generateText({ model, prompt: "hi" })).text;
  },
  "LangChain ChatOpenAI": async () => {
    const m = new ChatOpenAI({
      model: "m",
      apiKey: "k",
      configuration: { baseURL: `${fs.server.url}/v1` },
    });
    return (await langchainWith(m, { policy: testPolicy().p }).invoke("hi")).text;
  },
  "LangChain ChatAnthropic": async () => {
    const m = new ChatAnthropic({ model: "m", apiKey: "k", anthropicApiUrl: fs.server.url });
    return (await langchainWith(m, { policy: testPolicy().p }).invoke("hi")).text;
  },
};
const NAMES = Object.keys(ADAPTERS);
const inBody = (error: FaultRule["error"], more: Partial<FaultRule> = {}): FaultRule => ({
  status: 200,
  error,
  ...more,
});

describe("an error in a 200 body is a failure", () => {
  it.each(NAMES)("%s: overloaded twice in a 200, then the answer: three requests", async (name) => {
    fs.script({ rules: [inBody("overloaded", { requests: [1, 2] })] });
    expect(await ADAPTERS[name]!()).toBe(TEXT);
    expect(fs.requests()).toBe(3);
  });

  it.each(NAMES)(
    "%s: an endless one gives up after 3 failed attempts, as overloaded",
    async (name) => {
      fs.script({ rules: [inBody("overloaded")] });
      const e = await ADAPTERS[name]!().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(Error);
      expect([reasonOf(e), failureOf(e)?.kind, fs.requests()]).toEqual([
        "attempts-exhausted",
        "overloaded",
        3,
      ]);
      expect(ledgerOf(e)?.attempts.map((a) => a.outcome)).toEqual(["failed", "failed", "failed"]);
    },
  );

  it.each(NAMES)("%s: a context-length error in a 200 is sent once", async (name) => {
    fs.script({ rules: [inBody("context_length")] });
    const e = await ADAPTERS[name]!().catch((x: unknown) => x);
    expect([reasonOf(e), failureOf(e)?.kind, fs.requests()]).toEqual([
      "not-retryable",
      "context_exceeded",
      1,
    ]);
  });

  it("the SDK raises the error class of the status the body says (openai: RateLimitError, anthropic: InternalServerError)", async () => {
    fs.script({ rules: [inBody("rate_limit")] });
    const e = await ADAPTERS["openai chat"]!().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.RateLimitError);
    fs.script({ rules: [inBody("server_error")] });
    const a = await ADAPTERS.anthropic!().catch((x: unknown) => x);
    expect(a).toBeInstanceOf(Anthropic.InternalServerError);
  });
});
