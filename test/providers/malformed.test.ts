import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { failureOf, partialOf, reasonOf } from "../../src/core/errors.ts";
import { withBreakwater as anthropicWith } from "../../src/providers/anthropic.ts";
import { withBreakwater as googleWith } from "../../src/providers/google.ts";
import { withBreakwater as openaiWith } from "../../src/providers/openai.ts";
import { SseEvent, SseRun } from "../../src/providers/sse.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

// A stream event whose data is not JSON (a proxy's error page, a broken encoder): before
// content a server failure, retried unseen; after it, an interruption with its partial, not
// the SDK's SyntaxError on a call the ledger counted a success.
const fs = useFaultServer();
const hi = [{ role: "user" as const, content: "hi" }];

/** One streamed call's text as the consumer read it, through each adapter. */
const STREAMS: Record<string, (onText: (t: string) => void) => Promise<void>> = {
  "openai chat": async (onText) => {
    const c = openaiWith(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    const s = await c.chat.completions.create({ model: "m", messages: hi, stream: true });
    for await (const chunk of s) onText(chunk.choices[0]?.delta?.content ?? "");
  },
  anthropic: async (onText) => {
    const c = anthropicWith(new Anthropic({ baseURL: fs.server.url, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    const s = await c.messages.create({ model: "m", max_tokens: 64, messages: hi, stream: true });
    for await (const e of s)
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") onText(e.delta.text);
  },
  google: async (onText) => {
    const g = new GoogleGenAI({ apiKey: "k", httpOptions: { baseUrl: fs.server.url } });
    const s = await googleWith(g, { policy: testPolicy().p }).models.generateContentStream({
      model: "gemini-test",
      contents: "hi",
    });
    for await (const chunk of s) onText(chunk.text ?? "");
  },
};
const NAMES = Object.keys(STREAMS);

async function read(name: string) {
  let text = "";
  try {
    await STREAMS[name]!((t) => {
      text += t;
    });
    return { text, error: undefined as unknown };
  } catch (error) {
    return { text, error };
  }
}

describe("a stream event that is not JSON", () => {
  it.each(NAMES)("%s: before content, a server failure retried unseen", async (name) => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "garbage" } }] });
    expect(await read(name)).toEqual({ text: TEXT, error: undefined });
    expect(fs.requests()).toBe(2);
  });

  it.each(NAMES)(
    "%s: after content, the stream is interrupted with its partial, sent once",
    async (name) => {
      fs.script({ rules: [{ stream: { after: 3, action: "garbage" } }] });
      const { text, error } = await read(name);
      expect(text).toBe("The fault server ");
      expect([
        reasonOf(error),
        failureOf(error)?.kind,
        failureOf(error)?.code,
        fs.requests(),
      ]).toEqual(["stream-interrupted", "server_error", "malformed_event", 1]);
      expect(partialOf(error)?.chunks.length).toBeGreaterThan(0);
    },
  );
});

describe("SseEvent.malformed reads the text", () => {
  it.each([
    ['data: {"a":1}\n\n', false],
    ['event: ping\ndata: {"type":"ping"}\n\n', false],
    ["data: [DONE]\n\n", false],
    [": keepalive\n\n", false],
    ["data:\n\n", false],
    ["data: [1]\n\n", false],
    ["data: <html>502</html>\n\n", true],
    ["event: x\ndata: oops\n\n", true],
    ["id: 7\r\ndata: not json\r\n\r\n", true],
  ])("%j: %s", (raw, bad) => {
    expect(new SseEvent(raw).malformed).toBe(bad);
  });

  it.each([
    ['data: {"t":"the metadata: x"}\n\ndata: {"t":"b"}\n\n', false],
    ['data: {"t":"a"}\n\ndata: [DONE]\n\n', false],
    ['event: x\r\ndata: {"t":"a"}\r\n\r\n', false],
    ['data: {"t":"a"}\n\ndata: <html>\n\n', true],
  ])("a run of %j: malformed %s (a data line's start only, never a word in a text)", (raw, bad) => {
    expect(new SseRun(new TextEncoder().encode(raw)).malformed).toBe(bad);
  });

  it("once parsed, what did not parse", () => {
    const e = new SseEvent('data: {"cut\n\n');
    expect(e.malformed).toBe(false); // it starts like JSON: the cheap read lets it by
    expect(e.json).toBeUndefined();
    expect(e.malformed).toBe(true);
  });
});
