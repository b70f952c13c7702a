import { createServer, type Server, type Socket } from "node:net";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { generateText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { failureOf, reasonOf } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropicWith } from "../../src/providers/anthropic.ts";
import { withBreakwater as googleWith } from "../../src/providers/google.ts";
import { withBreakwater as openaiWith } from "../../src/providers/openai.ts";
import { testPolicy } from "./fixture.ts";

// Faults on the wire, written byte by byte by a raw TCP server: bodies cut short under
// `Connection: close` (with a Content-Length, chunked), resets mid-body. Each is a
// `transport` failure: retried while nothing was shown, an interruption after.
type Fault = (s: Socket) => void;
let server: Server | undefined;
let accepted = 0;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

async function wire(fault: Fault): Promise<string> {
  accepted = 0;
  server = createServer((s) => {
    accepted++;
    s.on("error", () => {});
    s.once("data", () => fault(s));
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

const head = (type: string, framing: string) =>
  `HTTP/1.1 200 OK\r\ncontent-type: ${type}\r\n${framing}connection: close\r\n\r\n`;
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
const later = (s: Socket, end: "reset" | "close") =>
  setTimeout(() => (end === "reset" ? s.resetAndDestroy() : s.end()), 20);

const JSON_FAULTS: Record<string, Fault> = {
  "a Content-Length body closed short": (s) => {
    s.end(`${head("application/json", "content-length: 500\r\n")}{"id":"x","choi`);
  },
  "a Content-Length body reset short": (s) => {
    s.write(`${head("application/json", "content-length: 500\r\n")}{"id":"x","choi`);
    later(s, "reset");
  },
  "a chunked body closed mid-chunk": (s) => {
    s.end(
      `${head("application/json", "transfer-encoding: chunked\r\n")}10\r\n{"id":"x","choic\r\n`,
    );
  },
};

const ADAPTERS = {
  openai: {
    event: `data: {"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n`,
    json: (base: string) =>
      openaiWith(new OpenAI({ baseURL: `${base}/v1`, apiKey: "k" }), {
        policy: testPolicy().p,
      }).chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    stream: async (base: string, onText: (t: string) => void) => {
      const c = openaiWith(new OpenAI({ baseURL: `${base}/v1`, apiKey: "k" }), {
        policy: testPolicy().p,
      });
      const s = await c.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      for await (const x of s) onText(x.choices[0]?.delta?.content ?? "");
    },
  },
  anthropic: {
    event: `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n`,
    json: (base: string) =>
      anthropicWith(new Anthropic({ baseURL: base, apiKey: "k" }), {
        policy: testPolicy().p,
      }).messages.create({
        model: "m",
        max_tokens: 9,
        messages: [{ role: "user", content: "hi" }],
      }),
    stream: async (base: string, onText: (t: string) => void) => {
      const c = anthropicWith(new Anthropic({ baseURL: base, apiKey: "k" }), {
        policy: testPolicy().p,
      });
      const s = await c.messages.create({
        model: "m",
        max_tokens: 9,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      for await (const e of s)
        if (e.type === "content_block_delta" && e.delta.type === "text_delta") onText(e.delta.text);
    },
  },
};
const NAMES = Object.keys(ADAPTERS) as (keyof typeof ADAPTERS)[];

/** JSON calls of the adapters that read no stream here: @google/genai (through the fetch
 * layer) and the AI SDK (its provider's own fetch, under the middleware). */
const JSON_ONLY: Record<string, (base: string) => Promise<unknown>> = {
  google: (base) =>
    googleWith(new GoogleGenAI({ apiKey: "k", httpOptions: { baseUrl: base } }), {
      policy: testPolicy().p,
    }).models.generateContent({ model: "gemini-test", contents: "hi" }),
  "AI SDK": (base) =>
    generateText({
      model: wrapLanguageModel({
        model: createOpenAI({ baseURL: `${base}/v1`, apiKey: "k" }).chat("m"),
        middleware: breakwaterMiddleware({ policy: testPolicy().p }),
      }),
      prompt: "hi",
    }),
};
const jsonCall = (adapter: string) =>
  adapter in ADAPTERS ? ADAPTERS[adapter as keyof typeof ADAPTERS].json : JSON_ONLY[adapter]!;
const cases = [...NAMES, ...Object.keys(JSON_ONLY)].flatMap((a) =>
  Object.keys(JSON_FAULTS).map((f) => [a, f] as const),
);

describe("a body cut short on the wire is transport, and retried", () => {
  it.each(cases)("%s JSON, %s: 3 attempts, transport", async (adapter, fault) => {
    const base = await wire(JSON_FAULTS[fault]!);
    const e = await jsonCall(adapter)(base).catch((x: unknown) => x);
    expect([reasonOf(e), failureOf(e)?.kind, accepted]).toEqual([
      "attempts-exhausted",
      "transport",
      3,
    ]);
  });

  it.each(NAMES)(
    "%s stream, a chunked stream reset before content: retried, transport",
    async (adapter) => {
      const base = await wire((s) => {
        s.write(head("text/event-stream", "transfer-encoding: chunked\r\n"));
        later(s, "reset");
      });
      const e = await ADAPTERS[adapter].stream(base, () => {}).catch((x: unknown) => x);
      expect([reasonOf(e), failureOf(e)?.kind, accepted]).toEqual([
        "attempts-exhausted",
        "transport",
        3,
      ]);
    },
  );

  it.each(NAMES)(
    "%s stream, a chunked stream reset or closed after content: interrupted once, transport",
    async (adapter) => {
      for (const end of ["reset", "close"] as const) {
        const base = await wire((s) => {
          s.write(
            head("text/event-stream", "transfer-encoding: chunked\r\n") +
              chunk(ADAPTERS[adapter].event),
          );
          later(s, end);
        });
        let text = "";
        const e = await ADAPTERS[adapter].stream(base, (t) => (text += t)).catch((x: unknown) => x);
        expect([text, reasonOf(e), failureOf(e)?.kind, accepted]).toEqual([
          "Hi",
          "stream-interrupted",
          "transport",
          1,
        ]);
        await new Promise<void>((r) => server!.close(() => r()));
        server = undefined;
      }
    },
  );
});

describe("under load", () => {
  it("200 calls at once, 30% of answers cut short under Connection: close: nearly all answered (68% when a cut was unknown)", async () => {
    let seed = 7;
    const cut = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 < 0.3;
    const body = JSON.stringify({
      id: "c",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
    });
    const base = await wire((s) => {
      const h = head("application/json", `content-length: ${body.length}\r\n`);
      if (!cut()) return void s.end(h + body);
      s.write(h + body.slice(0, 20));
      later(s, "reset");
    });
    const p = policy({ backoff: { baseMs: 20, capMs: 100 } }); // the defaults' budget and admission
    const c = openaiWith(new OpenAI({ baseURL: `${base}/v1`, apiKey: "k" }), { policy: p });
    const calls = Array.from({ length: 200 }, () =>
      c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    );
    const answered = (await Promise.allSettled(calls)).filter((r) => r.status === "fulfilled");
    expect(answered.length).toBeGreaterThanOrEqual(180); // 194 on this machine; 136 before
    expect(accepted).toBeGreaterThan(200); // the cut ones were sent again
  });
});
