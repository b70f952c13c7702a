import OpenAI from "openai";
import { policy } from "../src/policy/policy.ts";
import { openaiDialect } from "../src/providers/dialects/openai.ts";
import { guardedFetch } from "../src/providers/fetch.ts";
import { withBreakwater } from "../src/providers/openai.ts";
import { ReadResponse } from "../src/providers/read-response.ts";
import { type Case, measure, perUnit, report } from "./harness.ts";

const CHUNKS = 2_000;

/** One chat stream of CHUNKS deltas and a usage chunk, as OpenAI sends it. */
function sse(): string {
  const chunk = (delta: object, usage: object | null = null) =>
    `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: null }], usage })}\n\n`;
  let body = chunk({ role: "assistant", content: "" });
  for (let i = 0; i < CHUNKS; i++) body += chunk({ content: "word " });
  body += chunk({}, { prompt_tokens: 3, completion_tokens: CHUNKS, total_tokens: CHUNKS + 3 });
  return `${body}data: [DONE]\n\n`;
}

/**
 * What the fetch layer costs the openai SDK per streamed chunk and per JSON call, with no
 * network: an in-memory fetch answers, so the ratio is breakwater's work (reading events
 * for content, usage and in-band errors; copying the bytes on) against the SDK's own.
 */
export async function benchAdapter(): Promise<void> {
  const reads = readsOf(1);
  // One event per network read, as a server sends them.
  const body = () => bodyOf(reads);
  const json = JSON.stringify({
    id: "c",
    object: "chat.completion",
    created: 1,
    model: "m",
    choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  });
  const fetch: typeof globalThis.fetch = async (_url, init) => {
    const stream = typeof init?.body === "string" && init.body.includes('"stream":true');
    return stream
      ? new Response(body(), { headers: { "content-type": "text/event-stream" } })
      : new Response(json, { headers: { "content-type": "application/json" } });
  };
  const raw = new OpenAI({
    apiKey: "sk-bench",
    baseURL: "http://bench.local/v1",
    maxRetries: 0,
    fetch,
  });
  const wrapped = withBreakwater(
    new OpenAI({ apiKey: "sk-bench", baseURL: "http://bench.local/v1", fetch }),
    { policy: policy() },
  );
  // The floor: a fetch that does only what any retry layer under the SDK must do for one
  // JSON answer (its own attempt signal tied to the SDK's, a deadline timer, the body read
  // and parsed inside the attempt for its usage, the answer handed on already read, the
  // rate-limit headers walked once) and nothing else: no policy, ledger, gates or checks.
  const floor = new OpenAI({
    apiKey: "sk-bench",
    baseURL: "http://bench.local/v1",
    maxRetries: 0,
    fetch: bareWrapper(fetch),
  });
  const streams: Case[] = [
    {
      name: "openai stream, SDK alone",
      run: async (n) => {
        for (let k = 0; k < n; k++) await streamOnce(raw);
      },
    },
    {
      name: "openai stream, withBreakwater",
      run: async (n) => {
        for (let k = 0; k < n; k++) await streamOnce(wrapped);
      },
    },
  ];
  const perChunk = perUnit(await measure(streams, 6, 41), CHUNKS);
  report(
    `openai chat stream through the fetch layer, per chunk (${CHUNKS} chunks, no network)`,
    perChunk,
    "openai stream, SDK alone",
  );
  const calls: Case[] = [
    {
      name: "openai create, SDK alone",
      run: async (n) => {
        for (let k = 0; k < n; k++) await raw.chat.completions.create({ model: "m", messages });
      },
    },
    {
      name: "openai create, withBreakwater",
      run: async (n) => {
        for (let k = 0; k < n; k++) await wrapped.chat.completions.create({ model: "m", messages });
      },
    },
    {
      name: "openai create, bare wrapper (floor)",
      run: async (n) => {
        for (let k = 0; k < n; k++) await floor.chat.completions.create({ model: "m", messages });
      },
    },
  ];
  report(
    "openai chat create through the fetch layer, per call (no network)",
    await measure(calls, 2_000, 9),
    "openai create, SDK alone",
  );
  // An agent's later turns: the request carries the conversation so far (200 messages,
  // about 60 kB), which the SDK serializes; the fetch layer must not read it again.
  const long = Array.from({ length: 200 }, (_, i) => ({
    role: i % 2 === 0 ? ("user" as const) : ("assistant" as const),
    content: `${"lorem ipsum dolor sit amet ".repeat(10)}${i}`,
  }));
  const longCall = (c: OpenAI) => c.chat.completions.create({ model: "m", messages: long });
  report(
    "openai chat create with a 60 kB conversation, per call (no network)",
    await measure(
      [
        { name: "long create, SDK alone", run: repeat(() => longCall(raw)) },
        { name: "long create, withBreakwater", run: repeat(() => longCall(wrapped)) },
      ],
      300,
      9,
    ),
    "long create, SDK alone",
  );
  await benchMarks();
}

const messages = [{ role: "user" as const, content: "hi" }];

/** One chat stream through `c`, read to its end. */
async function streamOnce(c: OpenAI): Promise<void> {
  const s = await c.chat.completions.create({
    model: "m",
    messages,
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const _ of s);
}

/** The stream's bytes in network reads of `per` events each. */
function readsOf(per: number): Uint8Array[] {
  const encoder = new TextEncoder();
  const events = sse().split(/(?<=\n\n)/);
  const reads: Uint8Array[] = [];
  for (let i = 0; i < events.length; i += per)
    reads.push(encoder.encode(events.slice(i, i + per).join("")));
  return reads;
}

const bodyOf = (reads: readonly Uint8Array[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const r of reads) c.enqueue(r);
      c.close();
    },
  });

/**
 * What the dialect's marks (a regex pre-test that skips parsing an event that holds no
 * usage and no error) and the runs (once content flows, a whole read no mark matches goes
 * on unsplit) earn, A/B in one run: the same fetch layer under the same SDK, with the
 * openai dialect as shipped, with its marks made unjoinable (an empty lookahead: the same
 * matches, but no runs), and with no marks (every event parsed). With one event per read
 * and with eight (a busy connection's reads hold several).
 */
async function benchMarks(): Promise<void> {
  const unjoinable = (m: RegExp | undefined) => m && new RegExp(`(?:${m.source})(?=)`, m.flags);
  const shipped = openaiDialect();
  const dialects = {
    "as shipped": shipped,
    "marks, no runs": {
      ...shipped,
      marks: { usage: unjoinable(shipped.marks?.usage), error: unjoinable(shipped.marks?.error) },
    },
    "no marks": { ...shipped, marks: undefined },
  };
  for (const per of [1, 8]) {
    const reads = readsOf(per);
    const fetch: typeof globalThis.fetch = async () =>
      new Response(bodyOf(reads), { headers: { "content-type": "text/event-stream" } });
    const client = (f: typeof globalThis.fetch) =>
      new OpenAI({ apiKey: "sk-bench", baseURL: "http://bench.local/v1", maxRetries: 0, fetch: f });
    const raw = client(fetch);
    const cases: Case[] = [
      { name: "SDK alone", run: repeat(() => streamOnce(raw)) },
      ...Object.entries(dialects).map(([name, dialect]) => {
        const c = client(guardedFetch({ fetch, policy: policy(), dialect }));
        return { name: `guardedFetch, ${name}`, run: repeat(() => streamOnce(c)) };
      }),
    ];
    report(
      `the marks and the runs, per chunk (${CHUNKS} chunks, ${per} event${per > 1 ? "s" : ""} per read)`,
      perUnit(await measure(cases, 6, 41), CHUNKS),
      "SDK alone",
    );
  }
}

/** The least a retry layer under the SDK does for one JSON answer (see `floor` above). */
function bareWrapper(base: typeof globalThis.fetch): typeof globalThis.fetch {
  return async (input, init = {}) => {
    const attempt = new AbortController();
    const abort = () => attempt.abort(init.signal?.reason);
    init.signal?.addEventListener("abort", abort, { once: true });
    const timer = setTimeout(() => attempt.abort(), 600_000);
    try {
      const res = await base(input, { ...init, signal: attempt.signal });
      const limits = new Map<string, string>();
      res.headers.forEach((value, name) => {
        if (RATE.test(name)) limits.set(name, value);
      });
      const text = await res.text();
      const json: unknown = JSON.parse(text);
      const usage = (json as { usage?: unknown }).usage;
      if (usage === null || limits.size < 0) throw new Error("unreachable: keeps the reads");
      return new ReadResponse(text, res, json);
    } finally {
      clearTimeout(timer);
      init.signal?.removeEventListener("abort", abort);
    }
  };
}
const RATE = /rate-?limit/i;

/** `op` n times, one after another. */
const repeat =
  (op: () => Promise<unknown>) =>
  async (n: number): Promise<void> => {
    for (let k = 0; k < n; k++) await op();
  };
