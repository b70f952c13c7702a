import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { ChatOpenAI } from "@langchain/openai";
import { streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { Agent, getGlobalDispatcher, setGlobalDispatcher, fetch as undiciFetch } from "undici";
import { describe, expect, it } from "vitest";
import { classify } from "../../src/core/classify.ts";
import { type BreakwaterError, partialOf, reasonOf } from "../../src/core/errors.ts";
import { guardedStream } from "../../src/policy/stream.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropic } from "../../src/providers/anthropic.ts";
import { withBreakwater as langchain } from "../../src/providers/langchain.ts";
import { withBreakwater as openai } from "../../src/providers/openai.ts";
import { drain, TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "three little words" }];
const claude = { model: "claude-test", max_tokens: 100, messages };
const clients = (extra = {}) => {
  const { p } = testPolicy(extra);
  return {
    oa: openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test-0000" }), {
      policy: p,
    }),
    an: anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test-0000" }), {
      policy: p,
    }),
  };
};

describe("the idle timeout counts content, not keepalives", () => {
  it.each([
    ["anthropic (event: ping)", "anthropic"],
    ["openai (SSE comments)", "openai"],
  ] as const)("%s: a stall behind keepalives ends at the idle timeout", async (_, sdk) => {
    fs.script({ rules: [{ stream: { after: 2, action: "stall", keepaliveMs: 40 } }] });
    const { oa, an } = clients({ idleTimeoutMs: 300 });
    const started = performance.now();
    const stream: AsyncIterable<unknown> =
      sdk === "anthropic"
        ? await an.messages.create({ ...claude, stream: true })
        : await oa.chat.completions.create({ model: "gpt-test", messages, stream: true });
    const { chunks, error } = await drain(stream);
    expect(chunks.length).toBeGreaterThan(0);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect((error as BreakwaterError).failure?.code).toBe("idle_timeout");
    expect(performance.now() - started).toBeLessThan(3_000); // keepalives every 40 ms did not hold it
  });
});

describe("undici's 300 s header and body timeouts do not govern: the policy does", () => {
  it("headers after undici's header timeout (lowered to 200 ms as a stand-in for 300 s): the SDK on undici dies, breakwater's call lives", async () => {
    // undici checks these timeouts on a one-second tick: 200 ms fires after about a second.
    fs.script({ rules: [{ headersDelayMs: 2_000 }] });
    const before = getGlobalDispatcher();
    const lowered = new Agent({ headersTimeout: 200, bodyTimeout: 200 });
    setGlobalDispatcher(lowered);
    try {
      const raw = new OpenAI({
        baseURL: `${fs.server.url}/v1`,
        apiKey: "sk-test",
        maxRetries: 0,
        fetch: undiciFetch as unknown as typeof fetch,
      });
      const died = await raw.chat.completions
        .create({ model: "gpt-test", messages })
        .catch((e: unknown) => e);
      // undici's HeadersTimeoutError, which openai-node reports as a timeout (cause dropped).
      expect(died).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
      expect(classify(died).kind).toBe("timeout");
      const { oa } = clients({ maxAttempts: 1, deadlineMs: 5_000 });
      const r = await oa.chat.completions.create({ model: "gpt-test", messages });
      expect(r.choices[0]!.message.content).toBe(TEXT);
    } finally {
      setGlobalDispatcher(before);
      await lowered.close();
    }
  });

  it("and the policy's deadline is what ends a call that is too slow", async () => {
    fs.script({ rules: [{ headersDelayMs: 2_000 }] });
    const t = testPolicy({ maxAttempts: 1, deadlineMs: 300 });
    const oa = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: t.p,
    });
    const started = performance.now();
    await oa.chat.completions.create({ model: "gpt-test", messages }).catch(() => {});
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(t.gaveUp.map((e) => [e.reason, e.failure?.kind])).toEqual([["deadline", "timeout"]]);
  });
});

/** Reads an AI SDK stream as an app does: its text, and the errors it reported. */
async function aiSdkStream(model: Parameters<typeof streamText>[0]["model"]) {
  const errors: unknown[] = [];
  const r = streamText({
    model,
    prompt: "hi",
    maxRetries: 0,
    onError: ({ error }) => void errors.push(error),
  });
  let text = "";
  try {
    for await (const part of r.fullStream) if (part.type === "text-delta") text += part.text;
  } catch (error) {
    errors.push(error); // a give-up errors the stream (no error part streamRetries would retry)
  }
  return { text, errors };
}

const TOOLS = [
  { name: "charge", arguments: '{"order":77,"cents":1999}' }, // 25 characters: 4 pieces
  { name: "notify", arguments: '{"to":"customer"}' }, // 17 characters: 3 pieces
];
/** A cut after the 10 words of text, the first call whole, and one piece of the second. */
const CUT_IN_SECOND_CALL = { toolCalls: TOOLS, stream: { after: 15, action: "cut" as const } };

const expectedAnswer = (firstId: string, secondId: string) => ({
  text: TEXT,
  toolCalls: [
    { id: firstId, name: "charge", arguments: TOOLS[0]!.arguments, complete: true },
    { id: secondId, name: "notify", arguments: '{"to":"c', complete: false },
  ],
  finish: undefined,
});

describe("a broken stream keeps its work: the text and tool calls so far, in one shape", () => {
  it("openai: partialOf(error).answer", async () => {
    fs.script({ rules: [CUT_IN_SECOND_CALL] });
    const { oa } = clients();
    const { error } = await drain(
      await oa.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(partialOf(error)?.answer).toEqual(expectedAnswer("call_fault0", "call_fault1"));
  });

  it("anthropic: the same answer from content blocks", async () => {
    fs.script({ rules: [CUT_IN_SECOND_CALL] });
    const { an } = clients();
    const { error } = await drain(await an.messages.create({ ...claude, stream: true }));
    expect(partialOf(error)?.answer).toEqual(expectedAnswer("toolu_fault0", "toolu_fault1"));
  });

  it("a whole answer with tool calls, then an error event: every call complete, the finish known", async () => {
    fs.script({
      rules: [{ toolCalls: TOOLS, stream: { after: 17, action: "error", error: "server_error" } }],
    });
    const { oa } = clients();
    const { error } = await drain(
      await oa.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(error).toBeInstanceOf(OpenAI.APIError); // the SDK's own error, from the event
    const answer = partialOf(error)?.answer;
    expect(answer?.toolCalls.map((c) => [c.name, c.arguments, c.complete])).toEqual([
      ["charge", TOOLS[0]!.arguments, true],
      ["notify", TOOLS[1]!.arguments, false], // no later call, no finish: not known to be whole
    ]);
  });

  it("the AI SDK middleware: the BreakwaterError the stream errors with carries the answer", async () => {
    fs.script({ rules: [CUT_IN_SECOND_CALL] });
    const model = wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }).chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: testPolicy().p }),
    });
    const { errors } = await aiSdkStream(model);
    const answer = partialOf(errors[0])?.answer;
    expect(answer?.text).toBe(TEXT);
    expect(answer?.toolCalls.map((c) => [c.name, c.complete])).toEqual([
      ["charge", true],
      ["notify", false],
    ]);
  });

  it("LangChain: the stream's error carries the text and tool call chunks so far", async () => {
    fs.script({ rules: [CUT_IN_SECOND_CALL] });
    const model = langchain(
      new ChatOpenAI({
        model: "gpt-test",
        apiKey: "sk-test",
        configuration: { baseURL: `${fs.server.url}/v1` },
      }),
      { policy: testPolicy().p },
    );
    let error: unknown;
    try {
      for await (const _ of await model.stream("hi"));
    } catch (e) {
      error = e;
    }
    const answer = partialOf(error)?.answer;
    expect(answer?.text).toBe(TEXT);
    expect(answer?.toolCalls.map((c) => [c.name, c.arguments, c.complete])).toEqual([
      ["charge", TOOLS[0]!.arguments, true],
      ["notify", '{"to":"c', false],
    ]);
  });
});

describe("continuation (opt-in): a broken answer goes on from where it broke", () => {
  const continuing = (extra = {}) => {
    const t = testPolicy(extra);
    return {
      ...t,
      oa: openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test-0000" }), {
        policy: t.p,
        continuation: true,
      }),
      an: anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test-0000" }), {
        policy: t.p,
        continuation: true,
      }),
    };
  };
  const chatText = (chunks: unknown[]) =>
    (chunks as OpenAI.ChatCompletionChunk[]).map((c) => c.choices[0]?.delta.content ?? "").join("");
  const claudeText = (events: unknown[]) =>
    (events as Anthropic.RawMessageStreamEvent[])
      .map((e) =>
        e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : "",
      )
      .join("");

  it("anthropic (assistant prefill): one answer, no span lost or repeated, both attempts on one ledger", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 3, action: "cut" } }] });
    const { an, ledgers } = continuing();
    const { chunks, error } = await drain(await an.messages.create({ ...claude, stream: true }));
    expect(error).toBeUndefined();
    expect(claudeText(chunks)).toBe(TEXT);
    expect(chunks.filter((e) => (e as { type: string }).type === "message_start")).toHaveLength(1);
    expect(fs.requests()).toBe(2);
    expect(ledgers[0]!.attempts.map((a) => a.outcome)).toEqual(["failed", "ok"]);
    // The SDK's helper reads it as one message too.
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 5, action: "cut" } }] });
    expect((await an.messages.stream(claude).finalMessage()).content[0]).toMatchObject({
      text: TEXT,
    });
  });

  it("a continuation the upstream refuses (a 400 to the prefill) ends the stream with the error, never cleanly", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 3, action: "cut" } },
        { requests: [2, 2], status: 400, message: "prefill is not supported for this model" },
      ],
    });
    const { an } = continuing();
    const { chunks, error } = await drain(await an.messages.create({ ...claude, stream: true }));
    expect(claudeText(chunks).length).toBeGreaterThan(0);
    expect(error).toBeInstanceOf(Error);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(2);
  });

  it("an OpenAI-compatible server with an assistant prefix (DeepSeek, Mistral): the same", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 4, action: "cut" } }] });
    const { oa } = continuing();
    const { chunks, error } = await drain(
      await oa.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(error).toBeUndefined();
    expect(chatText(chunks)).toBe(TEXT);
    expect(fs.requests()).toBe(2);
  });

  it("an in-band error after content continues too; the continuation may break and go on again", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 2, action: "error", error: "overloaded" } },
        { requests: [2, 2], stream: { after: 3, action: "cut" } },
      ],
    });
    const { an } = continuing({ maxAttempts: 4 });
    const { chunks, error } = await drain(await an.messages.create({ ...claude, stream: true }));
    expect(error).toBeUndefined();
    expect(claudeText(chunks)).toBe(TEXT);
    expect(fs.requests()).toBe(3);
  });

  it("never after a tool call, never past the deadline, never beyond the attempts", async () => {
    fs.script({ rules: [CUT_IN_SECOND_CALL] });
    const tool = await drain(
      await continuing().oa.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(reasonOf(tool.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);

    fs.script({
      rules: [{ requests: [1, 1], tokenLatencyMs: 60, stream: { after: 8, action: "cut" } }],
    });
    fs.server.resetStats();
    const late = continuing({ deadlineMs: 300 });
    const slow = await drain(await late.an.messages.create({ ...claude, stream: true }));
    expect(reasonOf(slow.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);

    fs.script({ rules: [{ requests: [1, 1], stream: { after: 3, action: "cut" } }] });
    fs.server.resetStats();
    const one = await drain(
      await continuing({ maxAttempts: 1 }).an.messages.create({ ...claude, stream: true }),
    );
    expect(reasonOf(one.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);
  });

  it("the AI SDK middleware over @ai-sdk/anthropic: one text, both attempts on one ledger", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 3, action: "cut" } }] });
    const t = testPolicy();
    const model = wrapLanguageModel({
      model: createAnthropic({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-ant-test" })(
        "claude-test",
      ),
      middleware: breakwaterMiddleware({ policy: t.p, continuation: true }),
    });
    const { text, errors } = await aiSdkStream(model);
    expect(errors).toEqual([]);
    expect(text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    expect(t.ledgers[0]!.attempts.map((a) => a.outcome)).toEqual(["failed", "ok"]);
  });

  it("off by default: the break ends the stream", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 3, action: "cut" } }] });
    const { an } = clients();
    const { error } = await drain(await an.messages.create({ ...claude, stream: true }));
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);
  });
});

describe("guardedStream(sdkStream): the stream behind an adapter's, and what it used", () => {
  it("openai and anthropic: a first-try success reports its usage on the ledger and the outcome", async () => {
    fs.script({});
    const oa = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }));
    const an = anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test" }));
    const streams: AsyncIterable<unknown>[] = [
      await oa.chat.completions.create({ model: "gpt-test", messages, stream: true }),
      await an.messages.create({ ...claude, stream: true }),
    ];
    for (const stream of streams) {
      const guarded = guardedStream(stream);
      const { error } = await drain(stream);
      expect(error).toBeUndefined();
      const { usage } = await guarded.done;
      expect(usage.inputTokens).toBeGreaterThan(0);
      expect(usage.outputTokens).toBeGreaterThan(0);
      expect(guarded.ledger.usage).toEqual(usage);
      expect(guarded.ledger.attempts).toHaveLength(1);
    }
  });

  it("anything else is refused with a ConfigError that names it", () => {
    expect(() => guardedStream({ controller: new AbortController() })).toThrow(
      /guardedStream: option "stream" must be a stream returned by breakwater/,
    );
  });
});

describe("what a broken or whole stream tells: events, however the network cut them", () => {
  const event = (delta: object, usage: object | null = null) =>
    `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: null }], usage })}\n\n`;
  // After the first content, one network read brings three content events at once: the
  // fetch layer hands it on unsplit (a run).
  const reads = [
    event({ role: "assistant", content: "" }),
    event({ content: "A " }),
    event({ content: "B " }) + event({ content: "C " }) + event({ content: "D " }),
  ];
  const tail = `${event({}, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 })}data: [DONE]\n\n`;
  const clientOf = (cut: boolean) => {
    const encoder = new TextEncoder();
    const fetch: typeof globalThis.fetch = async () => {
      let i = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(c) {
          if (i < reads.length) c.enqueue(encoder.encode(reads[i++]!));
          else if (cut) c.error(new TypeError("terminated"));
          else {
            c.enqueue(encoder.encode(tail));
            c.close();
          }
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    };
    return openai(new OpenAI({ apiKey: "sk-test", baseURL: "http://local.test/v1", fetch }), {
      policy: testPolicy().p,
    });
  };
  const create = (ai: OpenAI) => ai.chat.completions.create({ model: "m", messages, stream: true });

  it("partialOf(error).chunks: each event shown, with its raw text and JSON", async () => {
    const { error } = await drain(await create(clientOf(true)));
    expect(reasonOf(error)).toBe("stream-interrupted");
    const chunks = partialOf(error)?.chunks as { raw: string; json: any }[];
    expect(chunks.map((c) => c.raw)).toEqual(reads.join("").split(/(?<=\n\n)/));
    expect(chunks.map((c) => c.json.choices[0].delta.content)).toEqual([
      "",
      "A ",
      "B ",
      "C ",
      "D ",
    ]);
    expect(partialOf(error)?.answer?.text).toBe("A B C D ");
  });

  it("guardedStream(stream).done counts the events the consumer read", async () => {
    const stream = await create(clientOf(false));
    const guarded = guardedStream(stream);
    const { chunks, error } = await drain(stream);
    expect(error).toBeUndefined();
    expect(chunks).toHaveLength(6); // the SDK's chunks: the [DONE] event is none
    const outcome = await guarded.done;
    expect(outcome.chunks).toBe((reads.join("") + tail).split(/(?<=\n\n)/).length);
    expect(outcome.usage).toEqual({ inputTokens: 3, outputTokens: 4 });
  });
});
