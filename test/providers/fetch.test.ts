import { createOpenAI } from "@ai-sdk/openai";
import { GoogleGenAI } from "@google/genai";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { describe, expect, it, vi } from "vitest";
import { classify } from "../../src/core/classify.ts";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { ConfigError } from "../../src/core/validate.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { attemptFetch, BODY_JSON, guardedFetch } from "../../src/providers/fetch.ts";
import { withBreakwater as google } from "../../src/providers/google.ts";
import { withBreakwater as langchain } from "../../src/providers/langchain.ts";
import { withBreakwater as openai } from "../../src/providers/openai.ts";
import { useBlackhole } from "./blackhole.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "three little words" }];

/** A fetch that records the headers of every request it sends. */
function recording() {
  const seen: Headers[] = [];
  const fetch: typeof globalThis.fetch = (input, init) => {
    seen.push(new Headers(init?.headers));
    return globalThis.fetch(input, init);
  };
  return { fetch, seen };
}

describe("the attempt header: a server can tell retries apart", () => {
  it("openai: the SDK's own x-stainless-retry-count carries the retries so far", async () => {
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    const { fetch, seen } = recording();
    const ai = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test", fetch }), {
      policy: testPolicy().p,
    });
    await ai.chat.completions.create({ model: "gpt-test", messages });
    expect(seen.map((h) => h.get("x-stainless-retry-count"))).toEqual(["0", "1", "2"]);
    expect(seen.every((h) => !h.has("x-retry-attempt"))).toBe(true);
  });

  it("google: x-retry-attempt carries the attempt number; renamed or switched off on request", async () => {
    for (const [attemptHeader, name, want] of [
      [undefined, "x-retry-attempt", ["1", "2"]],
      ["x-attempt", "x-attempt", ["1", "2"]],
      [false, "x-retry-attempt", [null, null]],
    ] as const) {
      fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
      fs.server.resetStats();
      const { fetch, seen } = recording();
      const ai = google(
        new GoogleGenAI({ apiKey: "AIza-test", httpOptions: { baseUrl: fs.server.url, fetch } }),
        { policy: testPolicy().p, attemptHeader },
      );
      expect((await ai.models.generateContent({ model: "gemini-test", contents: "hi" })).text).toBe(
        TEXT,
      );
      expect(seen.map((h) => h.get(name))).toEqual(want);
    }
  });
});

describe("the attempt number on headers given as a plain object (a gateway's, a caller's own)", () => {
  it("set on a copy in any case of its name; the SDK's retry count kept; a bad header refused as Headers would", async () => {
    const sent: Headers[] = [];
    const layer = guardedFetch({
      policy: testPolicy().p,
      fetch: async (_url, init) => {
        sent.push(new Headers(init!.headers));
        return sent.length === 1 ? new Response("{}", { status: 503 }) : Response.json({});
      },
    });
    const given = { "X-Retry-Attempt": "7", "content-type": "application/json" };
    await layer("http://x.local/v1/other", { method: "POST", body: "{}", headers: given });
    expect(sent.map((h) => h.get("x-retry-attempt"))).toEqual(["1", "2"]); // set, not added
    expect(given["X-Retry-Attempt"]).toBe("7"); // the caller's own object is not changed
    sent.length = 0;
    const sdk = { "X-Stainless-Retry-Count": "0" };
    await layer("http://x.local/v1/other", { method: "POST", body: "{}", headers: sdk });
    expect(sent.map((h) => [h.get("x-stainless-retry-count"), h.get("x-retry-attempt")])).toEqual([
      ["0", null],
      ["1", null],
    ]);
    sent.length = 0;
    // The same name in two cases is joined, as Headers joins it.
    await layer("http://x.local/v1/other", {
      method: "POST",
      body: "{}",
      headers: { "X-A": "1", "x-a": "2" },
    });
    expect([sent[0]!.get("x-a"), sent[0]!.get("x-retry-attempt")]).toEqual(["1, 2", "1"]);
    for (const headers of [{ "a b": "c" }, { ok: "line\nbreak" }] as Record<string, string>[])
      await expect(
        layer("http://x.local/v1/other", { method: "POST", body: "{}", headers }),
      ).rejects.toThrow(TypeError);
  });
});

describe("a body its caller parsed already (the gateway's)", () => {
  it("is read from the object handed with it, not parsed again", async () => {
    const body = JSON.stringify({
      model: "m",
      messages: [{ role: "user", content: "x".repeat(5_000) }],
    });
    const layer = guardedFetch({
      policy: testPolicy().p,
      fetch: async () => Response.json({ choices: [] }),
    });
    const parse = vi.spyOn(JSON, "parse");
    try {
      const init = { method: "POST", body, [BODY_JSON]: { text: body, json: JSON.parse(body) } };
      parse.mockClear();
      await layer("http://x.local/v1/chat/completions", init);
      expect(parse.mock.calls.filter(([text]) => text === body)).toEqual([]);
      // A body rewritten after (a wrapper's) is not read from the object: it is parsed.
      const rewritten = body.replace('"m"', '"n"');
      await layer("http://x.local/v1/chat/completions", { ...init, body: rewritten });
      expect(parse.mock.calls.filter(([text]) => text === rewritten).length).toBeGreaterThan(0);
      // Without it, the body is parsed (for the rate limiter's estimate, the checks).
      await layer("http://x.local/v1/chat/completions", { method: "POST", body });
      expect(parse.mock.calls.filter(([text]) => text === body).length).toBeGreaterThan(0);
    } finally {
      parse.mockRestore();
    }
  });
});

describe("attemptFetch: under an SDK that breakwater retries above (AI SDK, LangChain)", () => {
  it("the AI SDK: each request carries the middleware's attempt number", async () => {
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    const { fetch, seen } = recording();
    const p = testPolicy().p;
    const model = wrapLanguageModel({
      model: createOpenAI({
        baseURL: `${fs.server.url}/v1`,
        apiKey: "sk-test",
        fetch: attemptFetch({ policy: p, fetch }),
      }).chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: p }),
    });
    await generateText({ model, prompt: "hi", maxRetries: 0 });
    expect(seen.map((h) => h.get("x-retry-attempt"))).toEqual(["1", "2", "3"]);
    // A stream's attempts too.
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    seen.length = 0;
    for await (const _ of streamText({ model, prompt: "hi", maxRetries: 0 }).textStream);
    expect(seen.map((h) => h.get("x-retry-attempt"))).toEqual(["1", "2"]);
  });

  it("LangChain's ChatOpenAI: the openai SDK's x-stainless-retry-count says the retries so far, in invoke and stream", async () => {
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    const { fetch, seen } = recording();
    const p = testPolicy().p;
    const model = langchain(
      new ChatOpenAI({
        model: "gpt-test",
        apiKey: "sk-test",
        configuration: {
          baseURL: `${fs.server.url}/v1`,
          fetch: attemptFetch({ policy: p, fetch }),
        },
      }),
      { policy: p },
    );
    await model.invoke("hi");
    expect(seen.map((h) => h.get("x-stainless-retry-count"))).toEqual(["0", "1", "2"]);
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    seen.length = 0;
    for await (const _ of await model.stream("hi"));
    expect(seen.map((h) => h.get("x-stainless-retry-count"))).toEqual(["0", "1"]);
  });

  it("every answer's rate-limit headers reach the policy's limiter", async () => {
    fs.script({ rateLimit: { requestsPerMinute: 600, tokensPerMinute: 1_000_000 } });
    const p = testPolicy().p;
    const model = wrapLanguageModel({
      model: createOpenAI({
        baseURL: `${fs.server.url}/v1`,
        apiKey: "sk-test",
        fetch: attemptFetch({ policy: p }),
      }).chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: p }),
    });
    await generateText({ model, prompt: "hi", maxRetries: 0 });
    const known = (
      p.options.limiter as unknown as { snapshot(): { limits: Record<string, unknown> } }
    ).snapshot();
    expect(JSON.stringify(known)).toContain("600");
  });

  it("refuses a bad option by name; a Request object is sent as it is", async () => {
    expect(() => attemptFetch({ attemptHeader: "bad header" })).toThrow(/option "attemptHeader"/);
    expect(() => attemptFetch({ policy: {} as never })).toThrow(ConfigError);
    const { fetch, seen } = recording();
    const res = await attemptFetch({ fetch })(new Request(`${fs.server.url}/__stats`));
    expect(res.status).toBe(200);
    expect(seen[0]!.has("x-retry-attempt")).toBe(false);
  });
});

describe("guardedFetch on its own", () => {
  it("validates its options by name", () => {
    expect(() => guardedFetch({ connectTimeoutMs: -1 })).toThrow(
      /option "connectTimeoutMs" must be/,
    );
    expect(() => guardedFetch({ connectTimeoutMs: 1.5 })).toThrow(ConfigError);
    expect(() => guardedFetch({ attemptHeader: "bad header" })).toThrow(
      /option "attemptHeader" must be/,
    );
    expect(() => guardedFetch({ fetch: 42 as never })).toThrow(/option "fetch" must be/);
  });

  it("a body that cannot be sent twice goes once, untouched; so does a Request object", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const f = guardedFetch({ policy: testPolicy().p });
    const body = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode("{}"));
        c.close();
      },
    });
    const url = `${fs.server.url}/v1/chat/completions`;
    const res = await f(url, { method: "POST", body, duplex: "half" } as RequestInit);
    expect(res.status).toBe(503);
    expect(fs.requests()).toBe(1);
    expect((await f(new Request(url, { method: "POST", body: "{}" }))).status).toBe(503);
    expect(fs.requests()).toBe(2);
  });

  it("hands back the answer it gave up on, with the outcome on its headers", async () => {
    fs.script({ rules: [{ status: 429, retryAfterMs: 60_000 }] });
    const f = guardedFetch({ policy: testPolicy().p });
    const res = await f(`${fs.server.url}/v1/chat/completions`, { method: "POST", body: "{}" });
    expect(res.status).toBe(429);
    expect(reasonOf({ headers: res.headers })).toBe("retry-after-too-long");
    expect(fs.requests()).toBe(1);
  });
});

describe("connectTimeoutMs: a connection that is never accepted", () => {
  const hole = useBlackhole();

  it("each attempt gives up at the connect timeout; the failure is a retried timeout", async () => {
    const f = guardedFetch({ connectTimeoutMs: 200, policy: testPolicy({ maxAttempts: 2 }).p });
    const started = performance.now();
    const error = await f(`http://127.0.0.1:${hole.port()}/v1/chat/completions`, {
      method: "POST",
      body: "{}",
    }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(classify(error)).toMatchObject({ kind: "timeout", code: "UND_ERR_CONNECT_TIMEOUT" });
    expect(ledgerOf(error)?.attempts).toHaveLength(2);
    expect(elapsed).toBeGreaterThanOrEqual(390); // two attempts of 200 ms
    expect(elapsed).toBeLessThan(3_000); // not undici's 10 s default, nor the OS's minutes
  });

  it("the AI SDK and LangChain, through attemptFetch: each attempt gives up at the connect timeout", async () => {
    const baseURL = `http://127.0.0.1:${hole.port()}/v1`;
    const p = testPolicy({ maxAttempts: 2 }).p;
    const fetch = attemptFetch({ policy: p, connectTimeoutMs: 200 });
    const model = wrapLanguageModel({
      model: createOpenAI({ baseURL, apiKey: "sk-test", fetch }).chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: p }),
    });
    const chat = langchain(
      new ChatOpenAI({ model: "gpt-test", apiKey: "sk-test", configuration: { baseURL, fetch } }),
      { policy: p },
    );
    for (const call of [
      () => generateText({ model, prompt: "hi", maxRetries: 0 }),
      () => chat.invoke("hi"),
    ]) {
      const started = performance.now();
      const error = await call().catch((e: unknown) => e);
      const elapsed = performance.now() - started;
      expect(ledgerOf(error)?.attempts.map((a) => a.failure?.kind)).toEqual(["timeout", "timeout"]);
      expect(elapsed).toBeGreaterThanOrEqual(390); // two attempts of 200 ms
      expect(elapsed).toBeLessThan(3_000); // not undici's 10 s default, nor the OS's minutes
    }
  });

  it("through the openai adapter: the SDK's timeout error; breakwater's word in onGiveUp", async () => {
    const t = testPolicy({ maxAttempts: 2 });
    const ai = openai(
      new OpenAI({ baseURL: `http://127.0.0.1:${hole.port()}/v1`, apiKey: "sk-test" }),
      {
        policy: t.p,
        connectTimeoutMs: 200,
      },
    );
    const started = performance.now();
    const error = await ai.chat.completions
      .create({ model: "gpt-test", messages })
      .catch((e: unknown) => e);
    // openai-node turns any failure whose text says "timed out" into APIConnectionTimeoutError
    // and drops its cause: the outcome rides on it through the SDK method's scope.
    expect(error).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    expect(t.gaveUp.map((e) => [e.reason, e.ledger.attempts.map((a) => a.failure?.kind)])).toEqual([
      ["attempts-exhausted", ["timeout", "timeout"]],
    ]);
    // And on the SDK's own error, though the SDK dropped the cause.
    expect(reasonOf(error)).toBe("attempts-exhausted");
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});
