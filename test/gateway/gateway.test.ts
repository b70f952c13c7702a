import { execFile } from "node:child_process";
import { promisify } from "node:util";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/core/validate.ts";
import { type Gateway, gateway } from "../../src/gateway/gateway.ts";
import type { FaultScript } from "../../src/testing/fault-server/script.ts";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";
import { pythonWithOpenai } from "../fixtures/python.ts";

// The gateway with the official SDKs and curl as clients, the fault server as every
// upstream: each failure behaves as the library's rules say, in the client's own format.
const run = promisify(execFile);
const KEY = "sk-gateway-test";
const UP_KEY = "sk-upstream-secret-0000";
const FAST = { backoff: { baseMs: 10, capMs: 40, rateLimitBaseMs: 20 } };
let primary: FaultServer;
let backup: FaultServer;
let gw: Gateway;

beforeAll(async () => {
  [primary, backup] = await Promise.all([startFaultServer(), startFaultServer()]);
  process.env.BW_TEST_UPSTREAM_KEY = UP_KEY;
  gw = await gateway({
    listen: { port: 0 },
    keys: [KEY],
    upstreams: {
      openai: {
        wire: "openai",
        baseUrl: `${primary.url}/v1`,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: FAST,
      },
      backup: {
        wire: "openai",
        baseUrl: `${backup.url}/v1`,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: FAST,
      },
      // The pool's own member on the primary: the 30 s hold its test hears stays on it, not
      // on the upstream the other tests call (which would wait it out).
      member: {
        wire: "openai",
        baseUrl: `${primary.url}/v1`,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: FAST,
      },
      slow: {
        wire: "openai",
        baseUrl: `${primary.url}/v1`,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: { ...FAST, attemptTimeoutMs: 300, firstTokenTimeoutMs: 300, idleTimeoutMs: 300 },
      },
      hedged: {
        wire: "openai",
        baseUrl: `${primary.url}/v1`,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: { ...FAST, hedge: { afterMs: 150, maxExtraRatio: 1 } },
      },
      anthropic: {
        wire: "anthropic",
        baseUrl: primary.url,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: FAST,
      },
      "anthropic-on": {
        wire: "anthropic",
        baseUrl: primary.url,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: FAST,
        continuation: true,
      },
      google: {
        wire: "google",
        baseUrl: primary.url,
        apiKey: "env:BW_TEST_UPSTREAM_KEY",
        policy: FAST,
      },
    },
    models: {
      "gpt-4o-mini": "openai",
      chained: ["openai", "backup"],
      "slow-chained": ["slow", { upstream: "backup", model: "backup-model" }],
      slow: "slow",
      hedged: "hedged",
      pooled: { pool: ["member", "backup"] },
      "claude-sonnet": "anthropic",
      "gemini-flash": "google",
      "claude-on": "anthropic-on",
    },
    keepAliveMs: 200,
  });
}, 30_000);
afterAll(async () => {
  await gw?.close();
  await primary?.close();
  await backup?.close();
});
beforeEach(() => {
  for (const s of [primary, backup]) {
    s.setScript({});
    s.resetStats();
  }
});

const openai = () => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 });
const ask = (model = "gpt-4o-mini") => ({
  model,
  messages: [{ role: "user" as const, content: "hi" }],
});
const HELLO = "The fault server says hello, one word at a time.";
const sent = (s: FaultServer) => s.stats().requests;
const script = (s: FaultScript) => primary.setScript(s);

/** What curl reads of a streamed chat call to `model`, byte for byte. */
async function curlStream(model: string): Promise<string> {
  const auth = `Authorization: Bearer ${KEY}`;
  const body = JSON.stringify({ ...ask(model), stream: true });
  const url = `${gw.url}/v1/chat/completions`;
  const args = ["-sN", url, "-H", auth, "-H", "content-type: application/json", "-d", body];
  return (await run("curl", args)).stdout;
}

describe("gateway: JSON calls through the official openai client", () => {
  it("a 500 once and a 429 with Retry-After are retried inside: one answer, the attempts said", async () => {
    script({
      rules: [
        { requests: [1, 1], status: 500 },
        { requests: [2, 2], status: 429, retryAfterMs: 50 },
      ],
    });
    const r = await openai().chat.completions.create(ask()).withResponse();
    expect(r.data.choices[0]?.message.content).toBe(HELLO);
    expect(r.response.headers.get("x-breakwater-attempts")).toBe("3");
    expect(Number(r.response.headers.get("x-breakwater-billed-tokens"))).toBeGreaterThan(0);
    expect(sent(primary)).toBe(3);
  });

  it("a 429 without Retry-After, a reset before headers: retried", async () => {
    script({
      rules: [
        { requests: [1, 1], status: 429 },
        { requests: [2, 2], reset: true },
      ],
    });
    const r = await openai().chat.completions.create(ask());
    expect(r.choices[0]?.message.content).toBe(HELLO);
    expect(sent(primary)).toBe(3);
  });

  it("a persistent 503: the policy's 3 attempts, then the provider's own 503 in the SDK's class", async () => {
    script({ rules: [{ status: 503 }] });
    const e = await openai()
      .chat.completions.create(ask())
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect((e as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect(sent(primary)).toBe(3);
  });

  it("a context-length 400 is sent once and handed on as the provider said it", async () => {
    script({ rules: [{ status: 400, error: "context_length" }] });
    const e = await openai()
      .chat.completions.create(ask())
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as { code?: string }).code).toBe("context_length_exceeded");
    expect(sent(primary)).toBe(1);
  });

  it("an upstream that never answers: its attempts time out, the gateway says 504 and why", async () => {
    script({ rules: [{ headersDelayMs: 10_000 }] });
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify(ask("slow")),
    });
    expect(r.status).toBe(504);
    expect(r.headers.get("x-breakwater-reason")).toBe("attempt-timeout");
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("attempt-timeout");
  });

  it("a chain: the primary's overload moves the call to the next upstream at once", async () => {
    script({ rules: [{ status: 503 }] });
    const r = await openai().chat.completions.create(ask("chained"));
    expect(r.choices[0]?.message.content).toBe(HELLO);
    expect(sent(primary)).toBe(1);
    expect(sent(backup)).toBe(1);
  });

  it("a chain whose every upstream fails hands the client the last provider's own answer", async () => {
    script({ rules: [{ status: 503 }] });
    backup.setScript({ rules: [{ status: 503 }] });
    const e = await openai()
      .chat.completions.create(ask("chained"))
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect((e as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect(sent(primary) + sent(backup)).toBeLessThanOrEqual(6); // the chain's cap: 3 + 3
  });

  it("a pool: calls spread over its upstreams; one that says wait cools down, the others take its calls", async () => {
    for (let i = 0; i < 4; i++) await openai().chat.completions.create(ask("pooled"));
    expect([sent(primary), sent(backup)]).toEqual([2, 2]); // the least recently used, in turn
    script({ rules: [{ status: 429, retryAfter: 30 }] });
    primary.resetStats();
    backup.resetStats();
    for (let i = 0; i < 4; i++) {
      const r = await openai().chat.completions.create(ask("pooled"));
      expect(r.choices[0]?.message.content).toBe(HELLO);
    }
    expect(sent(primary)).toBe(1); // asked once, then cooling down for its Retry-After
    expect(sent(backup)).toBe(4);
  });

  it("a content filter is sent once and handed on as the provider said it; a chain moves it on", async () => {
    script({ rules: [{ status: 400, error: "content_filter" }] });
    const t0 = Date.now();
    const e = await openai()
      .chat.completions.create(ask())
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as { code?: string }).code).toBe("content_filter");
    expect(sent(primary)).toBe(1);
    // Another model may answer it: the chain asks the next upstream, once.
    const r = await openai().chat.completions.create(ask("chained"));
    expect(r.choices[0]?.message.content).toBe(HELLO);
    expect([sent(primary), sent(backup)]).toEqual([2, 1]);
    // Nothing held it: the pool's 30 s Retry-After before is its own member's.
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it("a primary that flaps (503 for a while, healthy, 503 again): every call answers, each sends at most two requests, the primary takes the calls back", async () => {
    script({
      rules: [
        { window: [0, 1_200], status: 503 },
        { window: [2_400, 3_600], status: 503 },
      ],
    });
    const t0 = Date.now();
    const attempts: number[] = [];
    const served: ("primary" | "backup")[] = [];
    while (Date.now() - t0 < 4_800) {
      const before = sent(backup);
      const r = await openai().chat.completions.create(ask("chained")).withResponse();
      expect(r.data.choices[0]?.message.content).toBe(HELLO);
      attempts.push(Number(r.response.headers.get("x-breakwater-attempts")));
      served.push(sent(backup) > before ? "backup" : "primary");
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(Math.max(...attempts)).toBeLessThanOrEqual(2); // the overload moved on at once
    expect(served.filter((s) => s === "backup").length).toBeGreaterThan(0);
    expect(served.slice(-3)).toEqual(["primary", "primary", "primary"]); // healthy again: back
    expect(sent(primary) + sent(backup)).toBe(attempts.reduce((a, b) => a + b, 0));
  }, 30_000);

  it("hedging, as the upstream's policy asks: a silent first attempt raced by a hedge that answers, JSON and streamed", async () => {
    script({ rules: [{ requests: [1, 1], headersDelayMs: 5_000 }] });
    const t0 = Date.now();
    const r = await openai().chat.completions.create(ask("hedged")).withResponse();
    expect(r.data.choices[0]?.message.content).toBe(HELLO);
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(r.response.headers.get("x-breakwater-attempts")).toBe("2");
    script({ rules: [{ requests: [1, 1], headersDelayMs: 5_000 }] }); // counted anew from here
    const t1 = Date.now();
    const s = await openai().chat.completions.create({ ...ask("hedged"), stream: true });
    let text = "";
    for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe(HELLO);
    expect(Date.now() - t1).toBeLessThan(3_000); // not the 5 s the first attempt would take
    expect(sent(primary)).toBe(4);
  });

  it("a 20 s first token: the chain moves on at the first timeout, asking the next for its own model", async () => {
    script({ rules: [{ headersDelayMs: 20_000 }] });
    const t0 = Date.now();
    const s = await openai().chat.completions.create({ ...ask("slow-chained"), stream: true });
    let text = "";
    for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe(HELLO);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(backup.stats().timeline.map((a) => a.model)).toEqual(["backup-model"]);
  });
});

describe("gateway: streams", () => {
  it("passes a stream through as it comes; the SDK reads it whole", async () => {
    const s = await openai().chat.completions.create({ ...ask(), stream: true });
    let text = "";
    for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe(HELLO);
  });

  it("a failure before content is retried unseen", async () => {
    script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "error" } }] });
    const s = await openai().chat.completions.create({ ...ask(), stream: true });
    let text = "";
    for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe(HELLO);
    expect(sent(primary)).toBe(2);
  });

  it("a cut after content ends with an error event, never [DONE]: the SDK raises, curl sees it", async () => {
    script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    const s = await openai().chat.completions.create({ ...ask(), stream: true });
    let text = "";
    const e = await (async () => {
      for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
    })().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.APIError);
    expect(text.length).toBeGreaterThan(0);
    expect(sent(primary)).toBe(1); // never replayed
    const stdout = await curlStream("gpt-4o-mini");
    expect(stdout).toMatch(/data: \{"error":\{"message":.*"code":"stream-interrupted"/);
    expect(stdout).not.toContain("[DONE]");
  });

  it("a stall after content: the idle timeout ends it with an error event; a quiet stream gets keep-alives", async () => {
    script({ rules: [{ stream: { after: 2, action: "stall" } }] });
    const stdout = await curlStream("slow");
    expect(stdout).toContain(": keep-alive\n\n"); // quiet past keepAliveMs (200), before the idle cut (300)
    expect(stdout).toContain('"code":"stream-interrupted"');
    expect(stdout).not.toContain("[DONE]");
  });

  it("a stream that ends without [DONE]: before content retried unseen; after it, an error event, never a clean end", async () => {
    script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "end" } }] });
    const s = await openai().chat.completions.create({ ...ask(), stream: true });
    let text = "";
    for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe(HELLO);
    expect(sent(primary)).toBe(2);
    script({ rules: [{ stream: { after: 3, action: "end" } }] });
    primary.resetStats();
    const stdout = await curlStream("gpt-4o-mini");
    expect(stdout).toContain('"code":"stream-interrupted"');
    expect(stdout).not.toContain("[DONE]");
    const cut = await openai().chat.completions.create({ ...ask(), stream: true });
    const e = await (async () => {
      for await (const _ of cut);
    })().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.APIError);
    expect(sent(primary)).toBe(2); // one request each: nothing replayed
  });

  it("a malformed event after content ends the stream with an error, nothing replayed", async () => {
    script({ rules: [{ stream: { after: 2, action: "garbage" } }] });
    const s = await openai().chat.completions.create({ ...ask(), stream: true });
    const e = await (async () => {
      for await (const _ of s);
    })().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(Error);
    expect(sent(primary)).toBe(1);
  });
});

describe("gateway: the Anthropic and Google clients", () => {
  it("Anthropic's SDK: an overload retried, then the answer, JSON and streamed", async () => {
    script({ rules: [{ requests: [1, 1], status: 529 }] });
    const client = new Anthropic({ baseURL: gw.url, apiKey: KEY, maxRetries: 0 });
    const m = await client.messages.create({
      model: "claude-sonnet",
      max_tokens: 100,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(m.content[0]?.type === "text" && m.content[0].text).toBe(HELLO);
    const s = client.messages.stream({
      model: "claude-sonnet",
      max_tokens: 100,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(await s.finalText()).toBe(HELLO);
    expect(sent(primary)).toBe(3);
  });

  it("continuation (an upstream's opt-in): a stream cut after content goes on from its text, one answer; a refused prefill ends it with an error event", async () => {
    const client = new Anthropic({ baseURL: gw.url, apiKey: KEY, maxRetries: 0 });
    const stream = () =>
      client.messages.create({
        model: "claude-on",
        max_tokens: 100,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
    const read = async () => {
      let text = "";
      const types: string[] = [];
      const error = await (async () => {
        for await (const e of await stream()) {
          types.push(e.type);
          if (e.type === "content_block_delta" && e.delta.type === "text_delta")
            text += e.delta.text;
        }
      })().catch((x: unknown) => x);
      return { text, error, starts: types.filter((t) => t === "message_start").length };
    };
    script({ rules: [{ requests: [1, 1], stream: { after: 3, action: "cut" } }] });
    expect(await read()).toEqual({ text: HELLO, error: undefined, starts: 1 });
    expect(sent(primary)).toBe(2); // the first, and the continuation with the text so far
    script({
      rules: [
        { requests: [1, 1], stream: { after: 3, action: "cut" } },
        { requests: [2, 2], status: 400, message: "prefill is not supported for this model" },
      ],
    });
    const refused = await read();
    expect(refused.text.length).toBeGreaterThan(0);
    expect(HELLO.startsWith(refused.text)).toBe(true);
    expect(refused.error).toBeInstanceOf(Anthropic.APIError);
    expect(sent(primary)).toBe(4);
  });

  it("Google's SDK: a 503 retried, then the answer", async () => {
    script({ rules: [{ requests: [1, 1], status: 503 }] });
    const client = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gw.url } });
    const r = await client.models.generateContent({ model: "gemini-flash", contents: "hi" });
    expect(r.text).toBe(HELLO);
    expect(sent(primary)).toBe(2);
  });
});

describe("gateway: the official openai Python SDK as the client", () => {
  it("a 503 retried in the gateway, then the answer; a stream cut, or ended without [DONE], after content raises in Python", async () => {
    const python = await pythonWithOpenai();
    const code = `
import openai, sys
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2], max_retries=0)
r = c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
print(r.choices[0].message.content)
for _ in range(2):
    try:
        text = ""
        for chunk in c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True):
            text += chunk.choices[0].delta.content or "" if chunk.choices else ""
        print("ended cleanly:", text)
    except openai.APIError as e:
        print("raised:", type(e).__name__)
`;
    // The second stream is cut; the third ends cleanly with no [DONE] (Python's SDK alone
    // would end it as a whole answer).
    script({
      rules: [
        { requests: [1, 1], status: 503 },
        { requests: [3, 3], stream: { after: 3, action: "cut" } },
        { requests: [4, 4], stream: { after: 3, action: "end" } },
      ],
    });
    const { stdout } = await run(python, ["-c", code, gw.url, KEY], { timeout: 60_000 });
    expect(stdout).toBe(`${HELLO}\nraised: APIError\nraised: APIError\n`);
    expect(sent(primary)).toBe(4);
  }, 300_000);
});

describe("gateway: Idempotency-Key", () => {
  const withKey = (k: string) => ({ headers: { "Idempotency-Key": k } });

  it("the same request again gets the first answer, nothing sent; another body with the key is a 422", async () => {
    const first = await openai().chat.completions.create(ask(), withKey("k-1")).withResponse();
    const again = await openai().chat.completions.create(ask(), withKey("k-1")).withResponse();
    expect(again.data).toEqual(first.data);
    expect(first.response.headers.get("x-breakwater-replayed")).toBeNull();
    expect(again.response.headers.get("x-breakwater-replayed")).toBe("true");
    expect(sent(primary)).toBe(1);
    const other = await openai()
      .chat.completions.create(ask("chained"), withKey("k-1"))
      .catch((x: unknown) => x);
    expect(other).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    expect((other as { code?: string }).code).toBe("idempotency_key_reused");
    expect(sent(primary) + sent(backup)).toBe(1);
  });

  it("asked again while the first is under way, it waits for it: one request upstream, one answer twice", async () => {
    script({ rules: [{ headersDelayMs: 300 }] });
    const [a, b] = await Promise.all(
      [0, 1].map(() => openai().chat.completions.create(ask(), withKey("k-2")).withResponse()),
    );
    expect(b!.data).toEqual(a!.data);
    const replayed = [a, b].map((r) => r!.response.headers.get("x-breakwater-replayed"));
    expect(replayed.sort()).toEqual(["true", null].sort());
    expect(sent(primary)).toBe(1);
  });

  it("with idempotency: false the header is passed on and nothing kept", async () => {
    const off = await gateway({
      listen: { port: 0 },
      keys: [KEY],
      idempotency: false,
      upstreams: { u: { wire: "openai", baseUrl: `${primary.url}/v1`, apiKey: "u" } },
      models: { "*": "u" },
    });
    try {
      const client = new OpenAI({ baseURL: `${off.url}/v1`, apiKey: KEY, maxRetries: 0 });
      for (let i = 0; i < 2; i++) await client.chat.completions.create(ask(), withKey("k-off"));
      expect(sent(primary)).toBe(2);
    } finally {
      await off.close();
    }
  });

  it("a stream that failed in band, or that its client left, is not kept: the same request again is sent again", async () => {
    script({ rules: [{ requests: [1, 1], stream: { after: 2, action: "error" } }] });
    const broken = await openai().chat.completions.create(
      { ...ask(), stream: true },
      withKey("k-5"),
    );
    const e = await (async () => {
      for await (const _ of broken);
    })().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.APIError);
    script({ rules: [{ requests: [1, 1], tokenLatencyMs: 100 }] }); // slow enough to leave
    const left = await openai().chat.completions.create({ ...ask(), stream: true }, withKey("k-6"));
    for await (const _ of left) break; // the client leaves after its first chunk
    await new Promise((r) => setTimeout(r, 300));
    for (const k of ["k-5", "k-6"]) {
      const r = await openai()
        .chat.completions.create({ ...ask(), stream: true }, withKey(k))
        .withResponse();
      let text = "";
      for await (const c of r.data) text += c.choices[0]?.delta?.content ?? "";
      expect([k, text, r.response.headers.get("x-breakwater-replayed")]).toEqual([k, HELLO, null]);
    }
    expect(sent(primary)).toBe(4);
  });

  it("a failure is not kept: the same request again is sent again", async () => {
    script({ rules: [{ requests: [1, 1], status: 400, error: "context_length" }] });
    const e = await openai()
      .chat.completions.create(ask(), withKey("k-3"))
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    const r = await openai().chat.completions.create(ask(), withKey("k-3"));
    expect(r.choices[0]?.message.content).toBe(HELLO);
    expect(sent(primary)).toBe(2);
  });

  it("a stream read whole is kept and handed again whole; a key that is not printable ASCII is a 400", async () => {
    const read = async () => {
      const s = await openai()
        .chat.completions.create({ ...ask(), stream: true }, withKey("k-4"))
        .withResponse();
      let text = "";
      for await (const c of s.data) text += c.choices[0]?.delta?.content ?? "";
      return { text, replayed: s.response.headers.get("x-breakwater-replayed") };
    };
    expect(await read()).toEqual({ text: HELLO, replayed: null });
    expect(await read()).toEqual({ text: HELLO, replayed: "true" });
    expect(sent(primary)).toBe(1);
    const bad = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${KEY}`,
        "content-type": "application/json",
        "idempotency-key": "x".repeat(256),
      },
      body: JSON.stringify(ask()),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe(
      "invalid_idempotency_key",
    );
    expect(sent(primary)).toBe(1);
  });
});

describe("gateway: an agent's run across requests", () => {
  const call = (headers: Record<string, string>) =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(ask()),
    });

  it("one attempt cap across the run's requests: its second call gets what is left", async () => {
    const run = { "x-breakwater-run": "agent-7", "x-breakwater-run-max-attempts": "3" };
    script({
      rules: [
        { requests: [1, 1], status: 503 },
        { requests: [3, 9], status: 503 },
      ],
    });
    const first = await call(run);
    expect(first.status).toBe(200);
    expect(first.headers.get("x-breakwater-attempts")).toBe("2");
    const second = await call({ "x-breakwater-run": "agent-7" }); // the limits it began with
    expect(second.status).toBe(503);
    expect(second.headers.get("x-breakwater-attempts")).toBe("1");
    expect(second.headers.get("x-breakwater-run-attempts")).toBe("3");
    expect(second.headers.get("x-breakwater-reason")).toBe("run-attempts");
    expect(sent(primary)).toBe(3);
  });

  it("one deadline for the run: a request after it is refused before sending; bad headers are a 400", async () => {
    await call({ "x-breakwater-run": "agent-8", "x-breakwater-run-deadline-ms": "200" });
    await new Promise((r) => setTimeout(r, 300));
    const late = await call({ "x-breakwater-run": "agent-8" });
    expect(late.status).toBe(504);
    expect(late.headers.get("x-breakwater-reason")).toBe("run-deadline");
    expect(sent(primary)).toBe(1);
    expect((await call({ "x-breakwater-run": "no spaces allowed" })).status).toBe(400);
    const bad = await call({ "x-breakwater-run": "agent-9", "x-breakwater-run-max-tokens": "-5" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(
      /max-tokens/,
    );
  });
});

describe("gateway: nobody in who does not belong", () => {
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${gw.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });

  it("no key, or a wrong one: 401 in the client's format, nothing sent upstream", async () => {
    const e = await new OpenAI({
      baseURL: `${gw.url}/v1`,
      apiKey: "sk-wrong",
      maxRetries: 0,
    }).chat.completions
      .create(ask())
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.AuthenticationError);
    const a = await post("/v1/messages", JSON.stringify({ model: "claude-sonnet" }));
    expect(a.status).toBe(401);
    expect(await a.json()).toMatchObject({
      type: "error",
      error: { type: "authentication_error" },
    });
    expect(sent(primary)).toBe(0);
  });

  it("never returns or says the upstream's key", async () => {
    script({ rules: [{ status: 401, error: "auth" }] });
    const r = await post("/v1/chat/completions", JSON.stringify(ask()), {
      authorization: `Bearer ${KEY}`,
    });
    const all = `${[...r.headers].join("\n")}\n${await r.text()}\n${await (await fetch(`${gw.url}/metrics`)).text()}`;
    expect(all).not.toContain(UP_KEY);
  });

  it("hostile input gets a 4xx in the client's format: not JSON, too large, an unknown model or path", async () => {
    const auth = { authorization: `Bearer ${KEY}` };
    expect((await post("/v1/chat/completions", "{not json", auth)).status).toBe(400);
    expect(
      (await post("/v1/chat/completions", JSON.stringify({ x: "y".repeat(5 << 20) }), auth)).status,
    ).toBe(413);
    const unknown = await post("/v1/chat/completions", JSON.stringify(ask("no-such-model")), auth);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe(
      "model_not_found",
    );
    expect((await post("/v1/files", "{}", auth)).status).toBe(404);
    expect(
      (await post("/v1/chat/completions", "{}", { ...auth, "x-big": "z".repeat(20_000) })).status,
    ).toBe(431);
    expect(sent(primary)).toBe(0);
  });

  it("validates its configuration by name: a missing key, a public address, an unknown upstream", async () => {
    const base = {
      keys: [KEY],
      upstreams: { u: { wire: "openai", baseUrl: "http://127.0.0.1:1/v1", apiKey: "k" } },
      models: { m: "u" },
    };
    await expect(gateway({ ...base, keys: ["env:BW_NO_SUCH_VARIABLE"] })).rejects.toThrow(
      /keys\[0\]/,
    );
    await expect(gateway({ ...base, listen: { host: "0.0.0.0" } })).rejects.toThrow(/listen.host/);
    await expect(gateway({ ...base, models: { m: "nope" } })).rejects.toThrow(ConfigError);
    await expect(gateway({ ...base, models: { m: "nope" } })).rejects.toThrow(/models.m.upstream/);
    await expect(gateway({ ...base, extra: 1 })).rejects.toThrow(/"extra"/);
    await expect(gateway({ ...base, models: { m: { pool: ["u"] } } })).rejects.toThrow(
      /"models.m.pool" must be a list of two or more upstreams/,
    );
    await expect(gateway({ ...base, models: { m: { pool: ["u", "v"] } } })).rejects.toThrow(
      /"models.m.pool\[1\].upstream"/,
    );
    await expect(gateway({ ...base, idempotency: true })).rejects.toThrow(
      /"idempotency" must be false, or \{ ttlMs, maxBytes \}; got true/,
    );
    await expect(gateway({ ...base, idempotency: { ttlMs: 5 } })).rejects.toThrow(
      /"idempotency.ttlMs"/,
    );
  });

  it("counts on /metrics: requests by model and outcome, attempts, tokens", async () => {
    await openai().chat.completions.create(ask());
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    expect(text).toMatch(
      /breakwater_gateway_requests_total\{model="gpt-4o-mini",outcome="ok"\} \d+/,
    );
    expect(text).toMatch(/breakwater_gateway_attempts_total\{model="gpt-4o-mini"\} \d+/);
  });
});
