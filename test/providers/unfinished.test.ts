import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { failureOf, reasonOf } from "../../src/core/errors.ts";
import { withBreakwater as anthropic } from "../../src/providers/anthropic.ts";
import type { Dialect } from "../../src/providers/dialect.ts";
import { anthropicDialect } from "../../src/providers/dialects/anthropic.ts";
import { googleDialect } from "../../src/providers/dialects/google.ts";
import { openaiDialect } from "../../src/providers/dialects/openai.ts";
import { withBreakwater as google } from "../../src/providers/google.ts";
import { withBreakwater as openai } from "../../src/providers/openai.ts";
import { SseEvent, sseEvents, UnfinishedStream } from "../../src/providers/sse.ts";
import { drain, TEXT, testPolicy, useFaultServer } from "./fixture.ts";

// A stream whose body ends cleanly before its answer did (no `[DONE]`, no `message_stop`,
// no finish reason): a proxy or a provider that dropped the rest and closed politely. Read
// as the answer, the user would take a truncated answer for a whole one.
const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "hi" }];

/** Each SDK's stream under breakwater, read to its end: its text and how it ended. */
const STREAMS = {
  "openai chat": async () => {
    const c = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: testPolicy().p,
    });
    const s = await c.chat.completions.create({ model: "gpt-test", messages, stream: true });
    const { chunks, error } = await drain(s);
    return { text: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""), error };
  },
  "openai responses": async () => {
    const c = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: testPolicy().p,
    });
    const s = await c.responses.create({ model: "gpt-test", input: "hi", stream: true });
    const { chunks, error } = await drain(s);
    const deltas = chunks.map((e) => (e.type === "response.output_text.delta" ? e.delta : ""));
    return { text: deltas.join(""), error };
  },
  anthropic: async () => {
    const c = anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test" }), {
      policy: testPolicy().p,
    });
    const s = await c.messages.create({
      model: "claude-test",
      max_tokens: 100,
      messages,
      stream: true,
    });
    const { chunks, error } = await drain(s);
    const deltas = chunks.map((e) =>
      e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : "",
    );
    return { text: deltas.join(""), error };
  },
  google: async () => {
    const ai = google(
      new GoogleGenAI({ apiKey: "AIza-test", httpOptions: { baseUrl: fs.server.url } }),
      {
        policy: testPolicy().p,
      },
    );
    const s = await ai.models.generateContentStream({ model: "gemini-test", contents: "hi" });
    const { chunks, error } = await drain(s);
    return { text: chunks.map((c) => c.text ?? "").join(""), error };
  },
} as const;

describe("a stream that ends before its answer did, through each SDK", () => {
  it.each(Object.keys(STREAMS) as (keyof typeof STREAMS)[])(
    "%s: before content, retried unseen; after it, the SDK raises with the partial answer, nothing replayed",
    async (sdk) => {
      fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "end" } }] });
      const whole = await STREAMS[sdk]();
      expect(whole.error).toBeUndefined();
      expect(whole.text).toBe(TEXT);
      expect(fs.server.stats().requests).toBe(2);

      fs.script({ rules: [{ stream: { after: 3, action: "end" } }] });
      fs.server.resetStats();
      const cut = await STREAMS[sdk]();
      expect(cut.text.length).toBeGreaterThan(0);
      expect(TEXT.startsWith(cut.text)).toBe(true);
      expect(cut.error).toBeInstanceOf(Error);
      expect(reasonOf(cut.error)).toBe("stream-interrupted");
      expect(failureOf(cut.error)?.code).toBe("stream_unfinished");
      expect(fs.server.stats().requests).toBe(1);
    },
  );

  it("a healthy stream of each SDK ends as it did: its end event is an end", async () => {
    for (const sdk of Object.keys(STREAMS) as (keyof typeof STREAMS)[]) {
      const r = await STREAMS[sdk]();
      expect([sdk, r.error, r.text]).toEqual([sdk, undefined, TEXT]);
    }
  });
});

describe("the reader's end (sseEvents with `finished`)", () => {
  const body = (text: string) =>
    (async function* () {
      yield new TextEncoder().encode(text);
    })();
  const read = async (text: string, finished: (e: { data: string }) => boolean) => {
    const out: string[] = [];
    try {
      for await (const e of sseEvents(body(text), undefined, undefined, finished))
        for (const one of e.events()) out.push(one.data);
      return { out, error: undefined };
    } catch (error) {
      return { out, error };
    }
  };
  const done = (e: { data: string }) => e.data === "[DONE]";

  it("an end after the end event is the end; after any other, an UnfinishedStream, once", async () => {
    expect(await read("data: a\n\ndata: [DONE]\n\n", done)).toEqual({
      out: ["a", "[DONE]"],
      error: undefined,
    });
    const cut = await read("data: a\n\ndata: b\n\n", done);
    expect(cut.out).toEqual(["a", "b"]);
    expect(cut.error).toBeInstanceOf(UnfinishedStream);
    // An event with no blank line after it is still the last one read.
    expect((await read("data: a\n\ndata: [DONE]", done)).error).toBeUndefined();
    expect((await read("", done)).error).toBeInstanceOf(UnfinishedStream); // no answer at all
  });

  it("the last event with data is judged: a keep-alive comment or blank lines after the end end nothing", async () => {
    expect((await read("data: a\n\ndata: [DONE]\n\n\n", done)).error).toBeUndefined();
    expect((await read("data: a\n\ndata: [DONE]\n\n: keep-alive\n\n", done)).error).toBeUndefined();
    expect((await read("data: a\n\n: keep-alive\n\n", done)).error).toBeInstanceOf(
      UnfinishedStream,
    );
  });

  it("each dialect's end: a finish, a usage chunk, a Responses stream's final event, a blocked prompt", () => {
    const ev = (json: unknown) => new SseEvent(`data: ${JSON.stringify(json)}\n\n`);
    const ends = (d: Dialect, json: unknown) => d.finished!(json, ev(json));
    const oa = openaiDialect();
    expect(ends(oa, { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })).toBe(true);
    expect(ends(oa, { choices: [], usage: { prompt_tokens: 1 } })).toBe(true);
    expect(
      ends(oa, { choices: [{ index: 0, delta: { content: "a" }, finish_reason: null }] }),
    ).toBe(false);
    expect(ends(oa, { type: "response.completed" })).toBe(true);
    expect(ends(oa, { type: "response.output_text.done" })).toBe(false);
    expect(ends(oa, { type: "image_generation.completed" })).toBe(true); // not a Responses stream: not judged
    expect(ends(googleDialect, { promptFeedback: { blockReason: "SAFETY" } })).toBe(true);
    expect(ends(googleDialect, { candidates: [{ content: { parts: [{ text: "a" }] } }] })).toBe(
      false,
    );
    expect(ends(anthropicDialect, { type: "message_stop" })).toBe(true);
    expect(ends(anthropicDialect, { type: "content_block_delta" })).toBe(false);
  });

  it("a `finished` that throws reads as an end; a reader that leaves is told nothing", async () => {
    const r = await read("data: a\n\n", () => {
      throw new Error("dialect bug");
    });
    expect(r).toEqual({ out: ["a"], error: undefined });
    const it = sseEvents(body("data: a\n\n"), undefined, undefined, done);
    await it.next();
    await it.return();
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });
});
