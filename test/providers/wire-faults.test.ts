import { createServer, type Server, type Socket } from "node:net";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { generateText, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { failureOf, partialOf, reasonOf } from "../../src/core/errors.ts";
import type { PolicyOptions } from "../../src/policy/options.ts";
import { policy } from "../../src/policy/policy.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropicWith } from "../../src/providers/anthropic.ts";
import { withBreakwater as googleWith } from "../../src/providers/google.ts";
import { withBreakwater as openaiWith } from "../../src/providers/openai.ts";
import { testPolicy } from "./fixture.ts";

// Faults on the wire, written byte by byte by a raw TCP server (a fault proxy's faults with
// no upstream behind it): resets and closes before the headers, after them, mid-body and
// mid-event; bodies cut short under `Connection: close` (with a Content-Length, chunked);
// a half-open socket that reads and never answers; a drip of one byte at a time. Each is
// named by its cause: a cut is `transport`, a silence `timeout`; retried while nothing was
// shown, an interruption with its partial after.
type Fault = (s: Socket) => void;
let server: Server | undefined;
let accepted = 0;
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const s of sockets) s.destroy();
  sockets.clear();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

async function wire(fault: Fault): Promise<string> {
  accepted = 0;
  server = createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
    // Requests, not connections: undici may open a connection it never sends on.
    s.once("data", () => {
      accepted++;
      fault(s);
    });
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

const head = (type: string, framing: string) =>
  `HTTP/1.1 200 OK\r\ncontent-type: ${type}\r\n${framing}connection: close\r\n\r\n`;
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
const later = (s: Socket, end: "reset" | "close") =>
  setTimeout(() => (end === "reset" ? s.resetAndDestroy() : s.end()), 20);
/** Writes `text` one byte every 100 ms, until the socket closes. */
const drip = (s: Socket, text: string) => {
  let i = 0;
  const t = setInterval(
    () => (i < text.length && !s.destroyed ? s.write(text[i++]!) : clearInterval(t)),
    100,
  );
  s.on("close", () => clearInterval(t));
};
const SSE = head("text/event-stream", "transfer-encoding: chunked\r\n");
/** A stream delimited by the close of its connection: what a drip writes raw bytes into. */
const SSE_TO_CLOSE = head("text/event-stream", "");
const JSON_HEAD = head("application/json", "content-length: 500\r\n");

/** What a fault makes of a call: the reason, the failure's kind, the requests sent, the
 * text shown, and the time it took within [min, max] ms (real time on loopback). */
interface Expected {
  reason: string;
  kind: string;
  attempts: number;
  text?: string;
  ms?: [number, number];
}
interface Case {
  fault: Fault;
  expect: Expected;
  policy?: PolicyOptions;
}

const cut = (attempts: number): Expected => ({
  reason: "attempts-exhausted",
  kind: "transport",
  attempts,
});
const JSON_FAULTS: Record<string, Case> = {
  "reset before the headers": { fault: (s) => s.resetAndDestroy(), expect: cut(3) },
  "closed before the headers": { fault: (s) => s.end(), expect: cut(3) },
  "the headers, then a reset": {
    fault: (s) => {
      s.write(JSON_HEAD);
      later(s, "reset");
    },
    expect: cut(3),
  },
  "a Content-Length body closed short": {
    fault: (s) => s.end(`${JSON_HEAD}{"id":"x","choi`),
    expect: cut(3),
  },
  "a Content-Length body reset short": {
    fault: (s) => {
      s.write(`${JSON_HEAD}{"id":"x","choi`);
      later(s, "reset");
    },
    expect: cut(3),
  },
  "a chunked body closed mid-chunk": {
    fault: (s) =>
      s.end(
        `${head("application/json", "transfer-encoding: chunked\r\n")}10\r\n{"id":"x","choic\r\n`,
      ),
    expect: cut(3),
  },
  "half-open: the request read, never answered": {
    fault: () => {},
    policy: { attemptTimeoutMs: 150 },
    expect: { reason: "attempt-timeout", kind: "timeout", attempts: 3, ms: [450, 2_500] },
  },
  "a drip: the headers, then a byte every 100 ms": {
    fault: (s) => {
      s.write(JSON_HEAD);
      drip(s, `{"id":"x","object":"chat.completion","choices":[]}`);
    },
    policy: { attemptTimeoutMs: 250 },
    expect: { reason: "attempt-timeout", kind: "timeout", attempts: 3, ms: [750, 3_000] },
  },
};

/** A content event of each adapter's dialect, and what a stream read through it shows. */
const OPENAI_EVENT = `data: {"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n`;
const EVENTS = {
  openai: OPENAI_EVENT,
  anthropic: `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n`,
  google: `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}]}\r\n\r\n`,
  "AI SDK": OPENAI_EVENT,
};
type Adapter = keyof typeof EVENTS;
const ADAPTER_NAMES = Object.keys(EVENTS) as Adapter[];

/** A stream that showed "Hi", then went quiet past the idle timeout (300 ms). */
const IDLE_AFTER_CONTENT: Expected = {
  reason: "stream-interrupted",
  kind: "timeout",
  attempts: 1,
  text: "Hi",
  ms: [300, 2_000],
};

const STREAM_FAULTS: Record<string, (event: string) => Case> = {
  "reset after the headers, before content": () => ({
    fault: (s) => {
      s.write(SSE);
      later(s, "reset");
    },
    expect: { ...cut(3), text: "" },
  }),
  "half an event, then a reset, before content": (event) => ({
    fault: (s) => {
      s.write(SSE + chunk(event.slice(0, 30)));
      later(s, "reset");
    },
    expect: { ...cut(3), text: "" },
  }),
  "a drip before content, slower than the first-token timeout": (event) => ({
    fault: (s) => {
      s.write(SSE_TO_CLOSE);
      drip(s, event);
    },
    policy: { firstTokenTimeoutMs: 250 },
    expect: { reason: "attempt-timeout", kind: "timeout", attempts: 3, text: "", ms: [750, 3_000] },
  }),
  "reset after content": (event) => ({
    fault: (s) => {
      s.write(SSE + chunk(event));
      later(s, "reset");
    },
    expect: { reason: "stream-interrupted", kind: "transport", attempts: 1, text: "Hi" },
  }),
  "closed after content": (event) => ({
    fault: (s) => {
      s.write(SSE + chunk(event));
      later(s, "close");
    },
    expect: { reason: "stream-interrupted", kind: "transport", attempts: 1, text: "Hi" },
  }),
  "half of the next event, then a reset, after content": (event) => ({
    fault: (s) => {
      s.write(SSE + chunk(event) + chunk(event.slice(0, 30)));
      later(s, "reset");
    },
    expect: { reason: "stream-interrupted", kind: "transport", attempts: 1, text: "Hi" },
  }),
  "a drip after content: bytes, but no event, past the idle timeout": (event) => ({
    fault: (s) => {
      s.write(SSE_TO_CLOSE + event);
      drip(s, event.repeat(4));
    },
    expect: IDLE_AFTER_CONTENT,
  }),
  "half-open after content: silent past the idle timeout": (event) => ({
    fault: (s) => s.write(SSE + chunk(event)),
    expect: IDLE_AFTER_CONTENT,
  }),
};

/** One call through each adapter, JSON or a stream read to its end; what it showed, and the
 * error it ended with. */
type Call = (base: string, p: PolicyOptions, onText: (t: string) => void) => Promise<unknown>;
const messages = [{ role: "user" as const, content: "hi" }];
const openai = (base: string, p: PolicyOptions) =>
  openaiWith(new OpenAI({ baseURL: `${base}/v1`, apiKey: "k" }), { policy: testPolicy(p).p });
const anthropic = (base: string, p: PolicyOptions) =>
  anthropicWith(new Anthropic({ baseURL: base, apiKey: "k" }), { policy: testPolicy(p).p });
const google = (base: string, p: PolicyOptions) =>
  googleWith(new GoogleGenAI({ apiKey: "k", httpOptions: { baseUrl: base } }), {
    policy: testPolicy(p).p,
  });
const aiSdk = (base: string, p: PolicyOptions) =>
  wrapLanguageModel({
    model: createOpenAI({ baseURL: `${base}/v1`, apiKey: "k" }).chat("m"),
    middleware: breakwaterMiddleware({ policy: testPolicy(p).p }),
  });

const JSON_CALLS: Record<Adapter, Call> = {
  openai: (base, p) => openai(base, p).chat.completions.create({ model: "m", messages }),
  anthropic: (base, p) =>
    anthropic(base, p).messages.create({ model: "m", max_tokens: 9, messages }),
  google: (base, p) =>
    google(base, p).models.generateContent({ model: "gemini-test", contents: "hi" }),
  "AI SDK": (base, p) => generateText({ model: aiSdk(base, p), prompt: "hi", maxRetries: 0 }),
};
const STREAM_CALLS: Record<Adapter, Call> = {
  async openai(base, p, onText) {
    const s = await openai(base, p).chat.completions.create({ model: "m", messages, stream: true });
    for await (const x of s) onText(x.choices[0]?.delta?.content ?? "");
  },
  async anthropic(base, p, onText) {
    const s = await anthropic(base, p).messages.create({
      model: "m",
      max_tokens: 9,
      messages,
      stream: true,
    });
    for await (const e of s)
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") onText(e.delta.text);
  },
  async google(base, p, onText) {
    const s = await google(base, p).models.generateContentStream({
      model: "gemini-test",
      contents: "hi",
    });
    for await (const x of s) onText(x.text ?? "");
  },
  async "AI SDK"(base, p, onText) {
    let failure: unknown;
    const r = streamText({
      model: aiSdk(base, p),
      prompt: "hi",
      maxRetries: 0,
      onError: ({ error }) => void (failure = error),
    });
    for await (const part of r.fullStream) if (part.type === "text-delta") onText(part.text);
    if (failure !== undefined) throw failure;
  },
};

/** Runs `call` against `c`'s fault and checks what it made of it. */
async function check(call: Call, c: Case): Promise<void> {
  const base = await wire(c.fault);
  let text = "";
  const started = performance.now();
  const e = await call(base, c.policy ?? {}, (t) => (text += t)).then(
    () => undefined,
    (x: unknown) => x,
  );
  const ms = performance.now() - started;
  const x = c.expect;
  expect([reasonOf(e), failureOf(e)?.kind, accepted]).toEqual([x.reason, x.kind, x.attempts]);
  if (x.text !== undefined) expect(text).toBe(x.text);
  if (x.text)
    expect(partialOf(e)?.answer?.text ?? x.text, "the partial keeps what was shown").toBe(x.text);
  if (x.ms) {
    expect(ms).toBeGreaterThanOrEqual(x.ms[0]);
    expect(ms).toBeLessThan(x.ms[1]);
  }
}

describe("a fault on the wire is called by its cause: JSON", () => {
  const cases = ADAPTER_NAMES.flatMap((a) => Object.keys(JSON_FAULTS).map((f) => [a, f] as const));
  it.each(cases)("%s, %s", (adapter, fault) => check(JSON_CALLS[adapter], JSON_FAULTS[fault]!));
});

describe("a fault on the wire is called by its cause: streams", () => {
  const cases = ADAPTER_NAMES.flatMap((a) =>
    Object.keys(STREAM_FAULTS).map((f) => [a, f] as const),
  );
  it.each(cases)("%s, %s", (adapter, fault) =>
    check(STREAM_CALLS[adapter], STREAM_FAULTS[fault]!(EVENTS[adapter])),
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
