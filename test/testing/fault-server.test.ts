import { connect, type Socket } from "node:net";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { BreakwaterError, reasonOf } from "../../src/core/errors.ts";
import { throwIfNotOk } from "../../src/http/http-error.ts";
import { policy } from "../../src/policy/policy.ts";
import { parseScript } from "../../src/testing/fault-server/script.ts";
import { startFaultServer } from "../../src/testing/fault-server/server.ts";
import { useFaultServer } from "../fault-fixture.ts";

const fs = useFaultServer();

const chat = (content = "hello there") =>
  JSON.stringify({ model: "gpt-test", messages: [{ role: "user", content }] });

/** One attempt of a plain fetch of the OpenAI route, as a plain client does it. */
const attempt = ({ signal }: { signal: AbortSignal }) =>
  fetch(`${fs.server.url}/v1/chat/completions`, { method: "POST", body: chat(), signal }).then(
    throwIfNotOk,
  );

describe("seven loopback conditions (status, Retry-After, slow headers, resets), through policy().execute and fetch", () => {
  const fast = { backoff: { baseMs: 20, capMs: 20, jitter: "none" as const } };

  it("immediate 200: 1 attempt, ok", async () => {
    const p = policy({ ...fast, maxAttempts: 3 });
    const res = await p.execute(attempt);
    expect(res.status).toBe(200);
    expect(fs.server.stats().requests).toBe(1);
  });

  it("503 then 200: 2 attempts, ok", async () => {
    fs.server.setScript({ rules: [{ route: "openai", requests: [1, 1], status: 503 }] });
    const res = await policy({ ...fast, maxAttempts: 3 }).execute(attempt);
    expect(res.status).toBe(200);
    expect(fs.server.stats().byRoute.openai).toEqual({
      requests: 2,
      byOutcome: { "503": 1, "200": 1 },
    });
  });

  it("401: 1 attempt, not retryable", async () => {
    fs.server.setScript({ rules: [{ status: 401 }] });
    const err = await policy({ ...fast, maxAttempts: 3 })
      .execute(attempt)
      .catch((e) => e);
    expect(err.status).toBe(401);
    expect(reasonOf(err)).toBe("not-retryable");
    expect(fs.server.stats().requests).toBe(1);
  });

  it("Retry-After longer than the remaining deadline: 1 attempt, gives up before waiting", async () => {
    fs.server.setScript({ rules: [{ status: 503, retryAfter: 1 }] });
    const t0 = performance.now();
    const err = await policy({ ...fast, maxAttempts: 3, deadlineMs: 500 })
      .execute(attempt)
      .catch((e) => e);
    expect(performance.now() - t0).toBeLessThan(500);
    expect(err).toBeInstanceOf(BreakwaterError);
    expect(err.reason).toBe("deadline");
    expect(err.retryAfterMs).toBe(1000);
    expect(fs.server.stats().requests).toBe(1);
  });

  it("repeated 503 with 3 attempts allowed: 3 attempts, attempts used up", async () => {
    fs.server.setScript({ rules: [{ status: 503 }] });
    const err = await policy({ ...fast, maxAttempts: 3 })
      .execute(attempt)
      .catch((e) => e);
    expect(err.status).toBe(503);
    expect(reasonOf(err)).toBe("attempts-exhausted");
    expect(fs.server.stats().requests).toBe(3);
  });

  it("headers delayed 1 s against a 150 ms deadline: 1 attempt, deadline", async () => {
    // 150 ms, not less: on a loaded machine a shorter deadline can end the attempt before
    // its request reaches the server (which then counts it in the next test).
    fs.server.setScript({ rules: [{ headersDelayMs: 1_000 }] });
    const t0 = performance.now();
    const err = await policy({ ...fast, maxAttempts: 3, deadlineMs: 150 })
      .execute(attempt)
      .catch((e) => e);
    const took = performance.now() - t0;
    expect(reasonOf(err)).toBe("deadline");
    expect(took).toBeGreaterThanOrEqual(149);
    expect(took).toBeLessThan(900); // returned at the deadline, not when the headers came
    for (let i = 0; i < 100 && fs.server.stats().requests === 0; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(fs.server.stats().requests).toBe(1);
  });

  it("the caller does not permit retries: 1 attempt", async () => {
    fs.server.setScript({ rules: [{ status: 503 }] });
    const err = await policy({ maxAttempts: 1 })
      .execute(attempt)
      .catch((e) => e);
    expect(reasonOf(err)).toBe("attempts-exhausted");
    expect(fs.server.stats().requests).toBe(1);
  });
});

describe("the official SDK clients, their own retries off", () => {
  const openai = () =>
    new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test", maxRetries: 0 });
  const anthropic = () =>
    new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test", maxRetries: 0 });
  const google = () =>
    new GoogleGenAI({ apiKey: "g-test", httpOptions: { baseUrl: fs.server.url } });
  const messages = [{ role: "user" as const, content: "three little words" }];

  it("openai: a well-formed answer and stream, with usage", async () => {
    const r = await openai().chat.completions.create({ model: "gpt-4o", messages });
    expect(r.choices[0]!.message.content).toBe("The fault server says hello, one word at a time.");
    expect(r.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 10 });
    const s = await openai().chat.completions.create({
      model: "gpt-4o",
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: unknown;
    for await (const c of s) {
      text += c.choices[0]?.delta.content ?? "";
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe("The fault server says hello, one word at a time.");
    expect(usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 10 });
    expect(fs.server.stats().billed).toEqual({ inputTokens: 6, outputTokens: 20 });
  });

  it("openai raises its usual classes for 429, 529 and a context-length 400", async () => {
    fs.server.setScript({
      rules: [
        { requests: [1, 1], status: 429, retryAfter: 2 },
        { requests: [2, 2], status: 529 },
        { requests: [3, 3], status: 400, error: "context_length" },
        { requests: [4, 4], status: 429, error: "insufficient_quota" },
      ],
    });
    const c = openai();
    const call = () => c.chat.completions.create({ model: "gpt-4o", messages }).catch((e) => e);
    const e429 = await call();
    expect(e429).toBeInstanceOf(OpenAI.RateLimitError);
    expect(e429).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
    expect(e429.headers.get("retry-after")).toBe("2");
    const e529 = await call();
    expect(e529).toBeInstanceOf(OpenAI.InternalServerError);
    expect(e529.status).toBe(529);
    const e400 = await call();
    expect(e400).toBeInstanceOf(OpenAI.BadRequestError);
    expect(e400).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
      type: "invalid_request_error",
    });
    const quota = await call();
    expect(quota).toMatchObject({ status: 429, code: "insufficient_quota" });
    expect(fs.server.stats().requests).toBe(4); // the SDK retried nothing
  });

  it("anthropic: a well-formed answer and an event stream with usage", async () => {
    const r = await anthropic().messages.create({ model: "claude-test", max_tokens: 50, messages });
    expect(r.content[0]).toMatchObject({
      type: "text",
      text: "The fault server says hello, one word at a time.",
    });
    expect(r.usage).toMatchObject({ input_tokens: 3, output_tokens: 10 });
    const s = await anthropic().messages.create({
      model: "claude-test",
      max_tokens: 50,
      messages,
      stream: true,
    });
    const types: string[] = [];
    let text = "";
    let output = 0;
    for await (const ev of s) {
      types.push(ev.type);
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta")
        text += ev.delta.text;
      if (ev.type === "message_delta") output = ev.usage.output_tokens;
    }
    expect(text).toBe("The fault server says hello, one word at a time.");
    expect(output).toBe(10);
    expect(types[0]).toBe("message_start");
    expect(types.at(-1)).toBe("message_stop");
  });

  it("anthropic raises its usual classes for 429, 529 and a prompt-too-long 400; an error event mid-stream", async () => {
    fs.server.setScript({
      rules: [
        { requests: [1, 1], status: 429 },
        { requests: [2, 2], status: 529 },
        { requests: [3, 3], status: 400, error: "context_length" },
        { requests: [4, 4], stream: { after: 2, action: "error", error: "overloaded" } },
      ],
    });
    const c = anthropic();
    const call = () =>
      c.messages.create({ model: "claude-test", max_tokens: 50, messages }).catch((e) => e);
    const e429 = await call();
    expect(e429).toBeInstanceOf(Anthropic.RateLimitError);
    expect(e429.error.error.type).toBe("rate_limit_error");
    const e529 = await call();
    expect(e529).toBeInstanceOf(Anthropic.APIError);
    expect(e529.status).toBe(529);
    expect(e529.error.error.type).toBe("overloaded_error");
    const e400 = await call();
    expect(e400).toBeInstanceOf(Anthropic.BadRequestError);
    expect(e400.error.error.message).toMatch(/prompt is too long/);
    const s = await c.messages.create({
      model: "claude-test",
      max_tokens: 50,
      messages,
      stream: true,
    });
    const err = await (async () => {
      for await (const _ of s);
    })().catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBeUndefined();
    expect(err.error.error.type).toBe("overloaded_error");
  });

  it("google: a well-formed answer and stream with usageMetadata; ApiError for 429 (with RetryInfo), 503, 400", async () => {
    const g = google();
    const r = await g.models.generateContent({
      model: "gemini-test",
      contents: "three little words",
    });
    expect(r.text).toBe("The fault server says hello, one word at a time.");
    expect(r.usageMetadata).toMatchObject({ promptTokenCount: 3, candidatesTokenCount: 10 });
    let text = "";
    for await (const c of await g.models.generateContentStream({
      model: "gemini-test",
      contents: "hi",
    }))
      text += c.text ?? "";
    expect(text).toBe("The fault server says hello, one word at a time.");
    fs.server.setScript({
      rules: [
        { requests: [1, 1], status: 429, retryAfter: 7 },
        { requests: [2, 2], status: 503 },
        { requests: [3, 3], status: 400, error: "context_length" },
      ],
    });
    fs.server.resetStats();
    const call = () =>
      g.models.generateContent({ model: "gemini-test", contents: "hi" }).catch((e) => e);
    const e429 = await call();
    expect(e429.name).toBe("ApiError");
    expect(e429.status).toBe(429);
    expect(JSON.parse(e429.message).error).toMatchObject({
      status: "RESOURCE_EXHAUSTED",
      details: [{ retryDelay: "7s" }],
    });
    const e503 = await call();
    expect([e503.status, JSON.parse(e503.message).error.status]).toEqual([503, "UNAVAILABLE"]);
    const e400 = await call();
    expect([e400.status, JSON.parse(e400.message).error.status]).toEqual([400, "INVALID_ARGUMENT"]);
    expect(fs.server.stats().requests).toBe(3);
  });
});

describe("faults on script", () => {
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${fs.server.url}${path}`, {
      method: "POST",
      body: typeof body === "string" ? body : JSON.stringify(body),
      headers,
    });

  it("sends Retry-After as seconds, as an HTTP-date and as retry-after-ms, and x-should-retry", async () => {
    fs.server.setScript({
      rules: [
        { requests: [1, 1], status: 429, retryAfter: 3 },
        { requests: [2, 2], status: 503, retryAfterDate: 10 },
        { requests: [3, 3], status: 429, retryAfterMs: 1500, shouldRetry: false },
      ],
    });
    const a = await post("/v1/chat/completions", {});
    expect(a.headers.get("retry-after")).toBe("3");
    const b = await post("/v1/chat/completions", {});
    const at = Date.parse(b.headers.get("retry-after")!);
    expect(at - Date.now()).toBeGreaterThan(7_000);
    const c = await post("/v1/chat/completions", {});
    expect([c.headers.get("retry-after-ms"), c.headers.get("x-should-retry")]).toEqual([
      "1500",
      "false",
    ]);
  });

  it("resets the connection before answering", async () => {
    fs.server.setScript({ rules: [{ reset: true }] });
    const err = await post("/v1/messages", {}).catch((e) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect(fs.server.stats().byRoute.anthropic!.byOutcome).toEqual({ reset: 1 });
  });

  it("cuts a stream after N chunks", async () => {
    fs.server.setScript({ rules: [{ stream: { after: 3, action: "cut" } }] });
    const res = await post("/v1/chat/completions", { model: "m", stream: true });
    const err = await res.text().catch((e) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect(fs.server.stats().billed.outputTokens).toBe(3);
  });

  it("matches by probability deterministically for a seed", async () => {
    const run = async () => {
      fs.server.setScript({ seed: 42, rules: [{ probability: 0.5, status: 503 }] });
      const out: number[] = [];
      for (let i = 0; i < 20; i++) out.push((await post("/v1/chat/completions", {})).status);
      return out;
    };
    const a = await run();
    const b = await run();
    expect(a).toEqual(b);
    expect(a.filter((s) => s === 503).length).toBeGreaterThan(3);
    expect(a.filter((s) => s === 200).length).toBeGreaterThan(3);
  });

  it("matches by model, by time window and at most `times`", async () => {
    fs.server.setScript({
      rules: [
        { model: "bad-model", status: 404 },
        { window: [0, 60_000], times: 1, status: 500 },
      ],
    });
    expect((await post("/v1/chat/completions", { model: "bad-model" })).status).toBe(404);
    expect((await post("/v1/chat/completions", { model: "ok" })).status).toBe(500);
    expect((await post("/v1/chat/completions", { model: "ok" })).status).toBe(200);
  });

  it("rejects overflow beyond its capacity with the chosen status", async () => {
    fs.server.setScript({
      capacity: { maxConcurrent: 2, status: 529, retryAfter: 1 },
      rules: [{ headersDelayMs: 150 }],
    });
    const statuses = await Promise.all(
      Array.from({ length: 5 }, () => post("/v1/messages", {}).then((r) => r.status)),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    expect(statuses.filter((s) => s === 529)).toHaveLength(3);
    expect(fs.server.stats().maxInFlight).toBe(2);
  });

  it("answers malformed JSON with a 400 and bounds request bodies", async () => {
    const bad = await post("/v1/chat/completions", "{not json");
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.type).toBe("invalid_request_error");
    const small = await startFaultServer({ maxBodyBytes: 100 });
    try {
      const big = await fetch(`${small.url}/v1/messages`, {
        method: "POST",
        body: "x".repeat(5_000),
      });
      expect(big.status).toBe(413);
    } finally {
      await small.close();
    }
  });

  it("serves its stats and takes a new script over HTTP, with validation", async () => {
    const json = { "content-type": "application/json" };
    expect((await post("/__script", { rules: [{ status: 503 }] }, json)).status).toBe(200);
    expect((await post("/v1/chat/completions", {})).status).toBe(503);
    const rejected = await post("/__script", { rules: [{ status: 99 }] }, json);
    expect(rejected.status).toBe(400);
    expect((await rejected.json()).error.message).toMatch(
      /"rules\[0\].status" must be an integer >= 100; got 99/,
    );
    const stats = await (await fetch(`${fs.server.url}/__stats`)).json();
    expect(stats.requests).toBe(1);
    expect(stats.timeline[0]).toMatchObject({ route: "openai", outcome: "503" });
  });

  it("validates scripts and options with errors that name the field", async () => {
    expect(() => parseScript({ rules: [{ route: "azure" }] })).toThrow(
      /"rules\[0\].route" must be one of "openai"/,
    );
    expect(() => parseScript({ rules: [{ stream: { after: 1, action: "explode" } }] })).toThrow(
      /"rules\[0\].stream.action" must be one of "stall", "cut", "error", "garbage", "end"; got "explode"/,
    );
    expect(() => parseScript({ rules: [{ sttus: 503 }] })).toThrow(
      /"rules\[0\].sttus" must be a known option/,
    );
    expect(() => parseScript({ rules: [{ afterWork: true }] })).toThrow(
      /used only with route "tools"/,
    );
    expect(() => parseScript({ capacity: { maxConcurrent: 0 } })).toThrow(
      /"capacity.maxConcurrent"/,
    );
    await expect(startFaultServer({ host: "0.0.0.0" as never })).rejects.toThrow(
      /"host" must be one of "127.0.0.1", "::1", "localhost"/,
    );
  });
});

describe("the tool endpoint and its idempotency ledger", () => {
  const tool = (body: unknown, key?: string) =>
    fetch(`${fs.server.url}/tools/charge`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: key ? { "idempotency-key": key } : {},
    });

  it("the same key twice executes once and replays", async () => {
    const a = await (await tool({ order: 1, cents: 500 }, "k1")).json();
    const b = await (await tool({ cents: 500, order: 1 }, "k1")).json();
    expect(a).toMatchObject({ status: "ok", replayed: false, executionId: 1 });
    expect(b).toMatchObject({ status: "ok", replayed: true, executionId: 1 });
    expect(fs.server.stats().tools).toMatchObject({
      executed: 1,
      duplicatesPrevented: 1,
      duplicateEffects: 0,
    });
  });

  it("the same key with a different body is a 422; without keys a repeat is a duplicate effect", async () => {
    await tool({ order: 2 }, "k2");
    expect((await tool({ order: 3 }, "k2")).status).toBe(422);
    await tool({ order: 9 });
    await tool({ order: 9 });
    expect(fs.server.stats().tools).toMatchObject({
      executed: 3,
      mismatches: 1,
      duplicateEffects: 1,
    });
  });

  it("a repeat while the first is still running is a 409", async () => {
    fs.server.setScript({ rules: [{ route: "tools", requests: [1, 1], workMs: 150 }] });
    const first = tool({ order: 4 }, "k4");
    await new Promise((r) => setTimeout(r, 30));
    expect((await tool({ order: 4 }, "k4")).status).toBe(409);
    expect((await first).status).toBe(200);
    expect(fs.server.stats().tools).toMatchObject({ executed: 1, conflicts: 1 });
  });

  it("a 503 before any work executes nothing; afterWork executes and still fails", async () => {
    fs.server.setScript({
      rules: [
        { route: "tools", requests: [1, 1], status: 503 },
        { route: "tools", requests: [2, 2], status: 500, afterWork: true },
      ],
    });
    const a = await tool({ order: 5 });
    expect(a.status).toBe(503);
    expect((await a.json()).error).toMatchObject({ code: "UNAVAILABLE", retryable: true });
    expect(fs.server.stats().tools.executed).toBe(0);
    expect((await tool({ order: 5 })).status).toBe(500);
    expect(fs.server.stats().tools.executed).toBe(1);
  });
});

declare function gc(): void;

describe("the fault server under abuse", () => {
  const fs = useFaultServer();
  const json = { "content-type": "application/json" };

  /** A raw HTTP/1.1 exchange, so Host and Origin are exactly what we say. */
  const raw = (head: string, body = ""): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = connect(fs.server.port, "127.0.0.1", () => {
        socket.end(
          `${head}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
        );
      });
      let out = "";
      socket.on("data", (d) => (out += d));
      socket.on("end", () => resolve(out));
      socket.on("error", reject);
    });

  it("takes a script only as JSON, from this machine, and never a null one", async () => {
    const plain = await fetch(`${fs.server.url}/__script`, {
      method: "POST",
      body: JSON.stringify({ rules: [{ status: 503 }] }),
    });
    expect(plain.status).toBe(415); // text/plain: what a web page can send without asking
    const foreign = await fetch(`${fs.server.url}/__script`, {
      method: "POST",
      body: "{}",
      headers: { ...json, origin: "https://evil.example" },
    });
    expect(foreign.status).toBe(403);
    const rebound = await raw(
      `POST /__script HTTP/1.1\r\nhost: attacker.example:${fs.server.port}\r\ncontent-type: application/json`,
      "{}",
    );
    expect(rebound).toMatch(/^HTTP\/1.1 403/);
    const otherPort = await raw("GET /__stats HTTP/1.1\r\nhost: 127.0.0.1:1");
    expect(otherPort).toMatch(/^HTTP\/1.1 403/);
    const nulled = await fetch(`${fs.server.url}/__script`, {
      method: "POST",
      body: "null",
      headers: json,
    });
    expect(nulled.status).toBe(400);
    expect(fs.server.stats().requests).toBe(0);
    const local = await fetch(`${fs.server.url}/__script`, {
      method: "POST",
      body: "{}",
      headers: { ...json, origin: `http://localhost:${fs.server.port}` },
    });
    expect(local.status).toBe(200);
  });

  it("answers 400, not 500, to deeply nested JSON and a bad %-encoding", async () => {
    const deep = "[".repeat(200_000) + "]".repeat(200_000);
    const r1 = await fetch(`${fs.server.url}/v1/chat/completions`, {
      method: "POST",
      body: deep,
      headers: json,
    });
    expect(r1.status).toBe(400);
    const r2 = await fetch(`${fs.server.url}/tools/charge`, {
      method: "POST",
      body: deep,
      headers: json,
    });
    expect(r2.status).toBe(400);
    const r3 = await fetch(`${fs.server.url}/v1beta/models/%E0%A4%A:generateContent`, {
      method: "POST",
      body: "{}",
      headers: json,
    });
    expect(r3.status).toBe(400);
  });

  it("keeps digests, not bodies, of what the tools executed", async () => {
    gc();
    const before = process.memoryUsage().heapUsed;
    const big = JSON.stringify({ blob: "x".repeat(900 * 1024) });
    for (let i = 0; i < 150; i++) {
      const r = await fetch(`${fs.server.url}/tools/upload`, {
        method: "POST",
        body: big.replace('"blob"', `"blob${i}"`),
        headers: { ...json, "idempotency-key": `k${i}` },
      });
      expect(r.status).toBe(200);
      const result = await r.json();
      expect(result.args).toEqual({ sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    }
    gc();
    // 150 bodies of 0.9 MiB kept would be 135 MiB; digests are a few kilobytes.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(60 * 1024 * 1024);
    expect(fs.server.stats().tools.executed).toBe(150);
  });

  it("cuts a client that sends headers or a body too slowly, and caps connections", async () => {
    const server = await startFaultServer({ requestTimeoutMs: 300, maxConnections: 2 });
    try {
      const started = Date.now();
      const closed = await new Promise<string>((resolve) => {
        const socket = connect(server.port, "127.0.0.1", () => {
          socket.write(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100\r\n\r\n{",
          );
        });
        let out = "";
        socket.on("data", (d) => (out += d));
        socket.on("close", () => resolve(out));
      });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(closed).toMatch(/408|^$/); // a 408, or the connection dropped
      const held = await Promise.all(
        [0, 1, 2].map(
          () =>
            new Promise<Socket>((resolve) => {
              const s = connect(server.port, "127.0.0.1", () => resolve(s));
              s.on("error", () => {});
            }),
        ),
      );
      const third = await new Promise<boolean>((resolve) => {
        held[2]!.on("close", () => resolve(true));
        setTimeout(() => resolve(false), 1_000);
      });
      expect(third).toBe(true); // over maxConnections: closed by the server
      for (const s of held) s.destroy();
    } finally {
      await server.close();
    }
  });
});

describe("stream ids", () => {
  it("each streamed answer has its own id, its chunks one (chat and Responses): a client merging by id sees two answers", async () => {
    const client = new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test", maxRetries: 0 });
    const chatIds = async () => {
      const ids = new Set<string>();
      const s = await client.chat.completions.create({
        model: "gpt-test",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      for await (const c of s) ids.add(c.id);
      return [...ids];
    };
    const [a, b] = [await chatIds(), await chatIds()];
    expect([a.length, b.length]).toEqual([1, 1]);
    expect(a[0]).not.toBe(b[0]);
    const responseId = async () => {
      const s = await client.responses.create({ model: "gpt-test", input: "hi", stream: true });
      for await (const e of s) if (e.type === "response.completed") return e.response.id;
      return undefined;
    };
    const [r1, r2] = [await responseId(), await responseId()];
    expect(r1).toMatch(/^resp_fault-/);
    expect(r1).not.toBe(r2);
  });
});
