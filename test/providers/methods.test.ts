import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/core/validate.ts";
import { withBreakwater as anthropic } from "../../src/providers/anthropic.ts";
import { withBreakwater as google } from "../../src/providers/google.ts";
import { withBreakwater as openai } from "../../src/providers/openai.ts";
import { drain, TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "three little words" }];
const claude = { model: "claude-test", max_tokens: 100, messages };
const gemini = { model: "gemini-test", contents: "three little words" };

const clients = () => {
  const { p } = testPolicy();
  return {
    oa: openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test-0000" }), {
      policy: p,
    }),
    an: anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test-0000" }), {
      policy: p,
    }),
    go: google(
      new GoogleGenAI({ apiKey: "AIza-test-0000", httpOptions: { baseUrl: fs.server.url } }),
      { policy: p },
    ),
  };
};
type Clients = ReturnType<typeof clients>;

/** Reads a stream to its end and returns what it read: a method "works" when it resolves. */
const all = async (s: AsyncIterable<unknown>) => {
  const { chunks, error } = await drain(s);
  if (error !== undefined) throw error;
  return chunks;
};

/** Every request method users call, as they call it, and the error class the SDK raises on
 * a 503 it gives up on. */
const METHODS: [
  sdk: string,
  method: string,
  call: (c: Clients) => Promise<unknown>,
  raises: new (...a: never[]) => Error,
][] = [
  [
    "openai",
    "chat.completions.create",
    (c) => c.oa.chat.completions.create({ model: "gpt-test", messages }),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "chat.completions.create({ stream: true })",
    async (c) =>
      all(await c.oa.chat.completions.create({ model: "gpt-test", messages, stream: true })),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "chat.completions.create().withResponse()",
    async (c) =>
      (await c.oa.chat.completions.create({ model: "gpt-test", messages }).withResponse()).data,
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "chat.completions.create().asResponse()",
    async (c) =>
      (await c.oa.chat.completions.create({ model: "gpt-test", messages }).asResponse()).json(),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "chat.completions.parse",
    (c) => c.oa.chat.completions.parse({ model: "gpt-test", messages }),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "chat.completions.stream().finalChatCompletion()",
    (c) => c.oa.chat.completions.stream({ model: "gpt-test", messages }).finalChatCompletion(),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "chat.completions.create({ stream: true }).toReadableStream()",
    async (c) =>
      all(
        (
          await c.oa.chat.completions.create({ model: "gpt-test", messages, stream: true })
        ).toReadableStream() as unknown as AsyncIterable<unknown>,
      ),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "responses.create",
    (c) => c.oa.responses.create({ model: "gpt-test", input: "three little words" }),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "responses.create({ stream: true })",
    async (c) => all(await c.oa.responses.create({ model: "gpt-test", input: "hi", stream: true })),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "responses.stream().finalResponse()",
    (c) => c.oa.responses.stream({ model: "gpt-test", input: "hi" }).finalResponse(),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "responses.parse",
    (c) => c.oa.responses.parse({ model: "gpt-test", input: "hi" }),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "embeddings.create",
    (c) => c.oa.embeddings.create({ model: "text-embedding-3-small", input: "three little words" }),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "images.generate",
    (c) => c.oa.images.generate({ model: "gpt-image-1", prompt: "a wave" }),
    OpenAI.InternalServerError,
  ],
  [
    "openai",
    "audio.speech.create",
    async (c) =>
      (
        await c.oa.audio.speech.create({ model: "gpt-4o-mini-tts", voice: "alloy", input: "hi" })
      ).arrayBuffer(),
    OpenAI.InternalServerError,
  ],
  [
    "anthropic",
    "messages.create",
    (c) => c.an.messages.create(claude),
    Anthropic.InternalServerError,
  ],
  [
    "anthropic",
    "messages.create({ stream: true })",
    async (c) => all(await c.an.messages.create({ ...claude, stream: true })),
    Anthropic.InternalServerError,
  ],
  [
    "anthropic",
    "messages.create().withResponse()",
    async (c) => (await c.an.messages.create(claude).withResponse()).data,
    Anthropic.InternalServerError,
  ],
  [
    "anthropic",
    "messages.stream().finalMessage()",
    (c) => c.an.messages.stream(claude).finalMessage(),
    Anthropic.InternalServerError,
  ],
  [
    "anthropic",
    "messages.stream().on('text')",
    (c) =>
      new Promise<string>((resolve, reject) => {
        let text = "";
        c.an.messages
          .stream(claude)
          .on("text", (t) => void (text += t))
          .on("end", () => resolve(text))
          .on("error", reject);
      }),
    Anthropic.InternalServerError,
  ],
  [
    "anthropic",
    "messages.countTokens",
    (c) => c.an.messages.countTokens(claude),
    Anthropic.InternalServerError,
  ],
  [
    "anthropic",
    "messages.batches.create",
    (c) => c.an.messages.batches.create({ requests: [{ custom_id: "a", params: claude }] }),
    Anthropic.InternalServerError,
  ],
  [
    "anthropic",
    "messages.batches.retrieve",
    (c) => c.an.messages.batches.retrieve("msgbatch_fault0001"),
    Anthropic.InternalServerError,
  ],
  ["google", "models.generateContent", (c) => c.go.models.generateContent(gemini), ApiError],
  [
    "google",
    "models.generateContentStream",
    async (c) => all(await c.go.models.generateContentStream(gemini)),
    ApiError,
  ],
  ["google", "models.countTokens", (c) => c.go.models.countTokens(gemini), ApiError],
  [
    "google",
    "models.embedContent",
    (c) => c.go.models.embedContent({ model: "text-embedding-004", contents: "hi" }),
    ApiError,
  ],
  [
    "google",
    "chats.create().sendMessage",
    (c) => c.go.chats.create({ model: "gemini-test" }).sendMessage({ message: "hi" }),
    ApiError,
  ],
  [
    "google",
    "chats.create().sendMessageStream",
    async (c) =>
      all(await c.go.chats.create({ model: "gemini-test" }).sendMessageStream({ message: "hi" })),
    ApiError,
  ],
];

describe("every method of a wrapped client goes through the policy (never neither retries)", () => {
  it.each(METHODS)(
    "%s %s: 503 twice then 200 is 3 requests and an answer",
    async (_sdk, _m, call) => {
      fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
      await expect(call(clients())).resolves.toBeDefined();
      expect(fs.requests()).toBe(3);
    },
  );

  it.each(METHODS)(
    "%s %s: always 503 is maxAttempts requests and the SDK's own error",
    async (_sdk, _m, call, raises) => {
      fs.script({ rules: [{ status: 503 }] });
      const error = await call(clients()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(raises);
      expect(fs.requests()).toBe(3);
    },
  );

  it("streams keep the SDK's own objects: tee, controller, toReadableStream", async () => {
    const { oa, an } = clients();
    const s = await oa.chat.completions.create({ model: "gpt-test", messages, stream: true });
    expect(s.controller).toBeInstanceOf(AbortController);
    const [a, b] = s.tee();
    const text = (chunks: unknown[]) =>
      (chunks as OpenAI.ChatCompletionChunk[])
        .map((c) => c.choices[0]?.delta.content ?? "")
        .join("");
    expect(text(await all(a))).toBe(TEXT);
    expect(text(await all(b))).toBe(TEXT);
    const m = await an.messages.stream(claude).finalMessage();
    expect(m.content[0]).toMatchObject({ type: "text", text: TEXT });
  });

  it("a failed call's rejection is handled by whoever awaits it: no unhandled rejection", async () => {
    fs.script({ rules: [{ status: 400 }] });
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => void unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    try {
      const { oa } = clients();
      const error = await oa.chat.completions
        .create({ model: "gpt-test", messages })
        .withResponse()
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      await new Promise((r) => setTimeout(r, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});

describe("withBreakwater refuses what is not a client, by name", () => {
  it.each([
    ["openai", openai],
    ["anthropic", anthropic],
    ["google", google],
  ] as const)("%s", (_name, wrap) => {
    for (const bad of [null, undefined, 42, {}, { models: {} }]) {
      expect(() => (wrap as (c: unknown) => unknown)(bad)).toThrow(ConfigError);
      expect(() => (wrap as (c: unknown) => unknown)(bad)).toThrow(/option "client" must be/);
    }
  });
});
