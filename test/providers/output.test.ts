import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { generateText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { OutputError, RequestCheckError, reasonOf } from "../../src/core/errors.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import {
  withBreakwater as anthropic,
  callOptions as anthropicCall,
} from "../../src/providers/anthropic.ts";
import { callOptions, withBreakwater as openai } from "../../src/providers/openai.ts";
import { drain, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "refund order 77" }];
const claude = { model: "claude-test", max_tokens: 100, messages };
const CUT = '{"order": 77, "ce';
const GOOD = '{"order": 77, "cents": 1999}';
const Refund = z.object({ order: z.number(), cents: z.number().int() });
const RefundV = v.object({ order: v.number(), cents: v.pipe(v.number(), v.integer()) });

const clients = (extra = {}) => {
  const t = testPolicy();
  return {
    ...t,
    oa: openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test-0000" }), {
      policy: t.p,
      ...extra,
    }),
    an: anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test-0000" }), {
      policy: t.p,
      ...extra,
    }),
    ai: wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }).chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: t.p, ...extra }),
    }),
  };
};

describe("a truncated answer: one request, an OutputError with the text so far", () => {
  it.each(["openai", "anthropic", "ai-sdk"] as const)("%s", async (sdk) => {
    fs.script({ rules: [{ finish: "length", text: CUT }] });
    const { oa, an, ai } = clients();
    const call =
      sdk === "openai"
        ? oa.chat.completions.create({ model: "gpt-test", messages })
        : sdk === "anthropic"
          ? an.messages.create(claude)
          : generateText({ model: ai, prompt: "refund order 77", maxRetries: 0 });
    const error = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutputError);
    expect(error).toMatchObject({ kind: "truncated", text: CUT });
    expect(reasonOf(error)).toBe("not-retryable");
    expect(fs.requests()).toBe(1);
  });

  it("a truncated stream: the previews came, then the SDK's iteration throws the OutputError", async () => {
    fs.script({ rules: [{ finish: "length", text: "the refund is" }] });
    const { oa } = clients();
    const { chunks, error } = await drain(
      await oa.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("the refund is");
    expect(error).toMatchObject({ kind: "truncated", text: "the refund is" });
    expect(fs.requests()).toBe(1);
  });

  it("truncation: 'allow' hands the answer over as it came", async () => {
    fs.script({ rules: [{ finish: "length", text: CUT }] });
    const { oa } = clients({ truncation: "allow" });
    const r = await oa.chat.completions.create({ model: "gpt-test", messages });
    expect(r.choices[0]!.finish_reason).toBe("length");
  });
});

describe("an invalid answer is retried, then the valid one: both attempts on the ledger", () => {
  it.each([
    ["openai + zod", "openai", Refund],
    ["openai + valibot (the same hook, unchanged)", "openai", RefundV],
    ["anthropic + zod", "anthropic", Refund],
  ] as const)("%s", async (_, sdk, schema) => {
    fs.script({
      rules: [
        { requests: [1, 1], text: '{"order": 77,' },
        { requests: [2, 2], text: GOOD },
      ],
    });
    const { oa, an, ledgers } = clients();
    const text =
      sdk === "openai"
        ? (
            await oa.chat.completions.create(
              { model: "gpt-test", messages },
              callOptions({ validate: schema }),
            )
          ).choices[0]!.message.content
        : (
            (await an.messages.create(claude, anthropicCall({ validate: schema }))).content[0] as {
              text: string;
            }
          ).text;
    expect(text).toBe(GOOD);
    expect(fs.requests()).toBe(2);
    expect(ledgers[0]!.attempts.map((a) => [a.outcome, a.failure?.kind, a.failure?.code])).toEqual([
      ["failed", "invalid_output", "parse"],
      ["ok", undefined, undefined],
    ]);
    expect(ledgers[0]!.wasted.outputTokens).toBeGreaterThan(0);
  });

  it("the AI SDK middleware's validate", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], text: '{"order": "77", "cents": 1999}' },
        { requests: [2, 2], text: GOOD },
      ],
    });
    // `validate` is the middleware's own option (the SDK adapters take it per call).
    const ai = wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }).chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: testPolicy().p, validate: Refund }),
    });
    const r = await generateText({ model: ai, prompt: "refund order 77", maxRetries: 0 });
    expect(r.text).toBe(GOOD);
    expect(fs.requests()).toBe(2);
  });

  it("a refusal where an answer is wanted is invalid; always refused, the last one is thrown", async () => {
    fs.script({ rules: [{ refusal: "I can't help with refunds." }] });
    const { oa } = clients();
    const error = await oa.chat.completions
      .create({ model: "gpt-test", messages }, callOptions({ validate: Refund }))
      .catch((e: unknown) => e);
    expect(error).toMatchObject({
      kind: "invalid_output",
      problem: "refusal",
      text: "I can't help with refunds.",
    });
    expect(reasonOf(error)).toBe("attempts-exhausted");
    expect(fs.requests()).toBe(3);
  });
});

describe("requests that cannot succeed fail before they are sent, and spend nothing", () => {
  it("openai: a tool message without its call", async () => {
    const { oa } = clients();
    const error = await oa.chat.completions
      .create({
        model: "gpt-test",
        messages: [...messages, { role: "tool", tool_call_id: "call_x", content: "done" }],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestCheckError);
    expect(error).toMatchObject({ kind: "invalid_request", problem: "transcript" });
    expect((error as Error).message).toMatch(/call_x/);
    expect(fs.requests()).toBe(0);
  });

  it("anthropic: a tool_use left without its tool_result", async () => {
    const { an } = clients();
    const error = await an.messages
      .create({
        ...claude,
        messages: [
          ...messages,
          {
            role: "assistant",
            content: [{ type: "tool_use", id: "toolu_x", name: "charge", input: {} }],
          },
          { role: "user", content: "and?" },
        ],
      })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ problem: "transcript" });
    expect((error as Error).message).toMatch(/toolu_x/);
    expect(fs.requests()).toBe(0);
  });

  it("an output allowance that leaves the prompt no room (openai, anthropic stream, AI SDK)", async () => {
    const { oa, an, ai } = clients({ contextTokens: 1_000 });
    const a = await oa.chat.completions
      .create({ model: "gpt-test", messages, max_tokens: 1_000 })
      .catch((e: unknown) => e);
    expect(a).toMatchObject({ kind: "context_exceeded", problem: "max-output" });
    const b = await drain(await an.messages.create({ ...claude, max_tokens: 2_000, stream: true }));
    expect(b.error).toMatchObject({ problem: "max-output" });
    const c = await generateText({
      model: ai,
      prompt: "hi",
      maxOutputTokens: 5_000,
      maxRetries: 0,
    }).catch((e: unknown) => e);
    expect(c).toMatchObject({ problem: "max-output" });
    expect(
      await oa.chat.completions.create({ model: "gpt-test", messages, max_tokens: 100 }),
    ).toBeDefined();
    expect(fs.requests()).toBe(1);
  });
});

describe("JSON in a markdown fence, through the adapters", () => {
  const FENCED = `\`\`\`json\n${GOOD}\n\`\`\``;

  it.each(["openai", "ai-sdk"] as const)(
    "%s: read as the JSON it holds, in one request",
    async (sdk) => {
      fs.script({ rules: [{ text: FENCED }] });
      const { oa, ai } = clients();
      const text =
        sdk === "openai"
          ? (
              await oa.chat.completions.create(
                { model: "gpt-test", messages },
                callOptions({ validate: Refund }),
              )
            ).choices[0]!.message.content
          : (
              await generateText({
                model: wrapLanguageModel({
                  model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" }).chat(
                    "gpt-test",
                  ),
                  middleware: breakwaterMiddleware({ policy: testPolicy().p, validate: Refund }),
                }),
                prompt: "refund order 77",
                maxRetries: 0,
              })
            ).text;
      expect(text).toBe(FENCED); // handed over as it came
      expect(fs.requests()).toBe(1);
      void ai;
    },
  );

  it("fencedJson: false: a fenced answer is not JSON, retried, and fails as parse", async () => {
    fs.script({ rules: [{ text: FENCED }] });
    const { oa } = clients({ fencedJson: false });
    const error = await oa.chat.completions
      .create({ model: "gpt-test", messages }, callOptions({ validate: Refund }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutputError);
    expect((error as OutputError).problem).toBe("parse");
    expect(fs.requests()).toBe(3);
  });
});
