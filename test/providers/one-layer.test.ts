import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { fallback } from "../../src/policy/fallback.ts";
import { policy } from "../../src/policy/policy.ts";
import { pool } from "../../src/policy/pool.ts";
import { withBreakwater as anthropicWith } from "../../src/providers/anthropic.ts";
import { callOptions } from "../../src/providers/fetch.ts";
import { withBreakwater as googleWith } from "../../src/providers/google.ts";
import { withBreakwater as openaiWith } from "../../src/providers/openai.ts";
import { useFaultServer, useWarnings } from "./fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "hi" }];
const fast = () => policy({ maxAttempts: 3, backoff: { baseMs: 5, capMs: 10 } });
const openai = (p = fast()) =>
  openaiWith(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), { policy: p });
const anthropic = (p = fast()) =>
  anthropicWith(new Anthropic({ baseURL: fs.server.url, apiKey: "k" }), { policy: p });
/** What the server saw of each request: the retries it said it was on. */
const retries = () => fs.server.stats().timeline.map((a) => a.retries);

const { all: warnings } = useWarnings();

describe("a request's own retry knobs are breakwater's (one layer per call)", () => {
  it("openai: a per-request maxRetries sends maxAttempts requests under a 503, and says so once", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const client = openai();
    const e = await client.chat.completions
      .create({ model: "m", messages }, { maxRetries: 4 })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect(fs.requests()).toBe(3); // not 3 x 5 = 15
    expect(retries()).toEqual([0, 1, 2]);
    expect(ledgerOf(e)?.attempts).toHaveLength(3);
    await client.chat.completions
      .create({ model: "m", messages }, { maxRetries: 4 })
      .catch(() => {});
    await new Promise((r) => setImmediate(r));
    expect(warnings.filter((w) => w.includes("maxRetries (4) is ignored"))).toHaveLength(1);
  });

  it("anthropic: a per-request maxRetries sends maxAttempts requests under a 529", async () => {
    fs.script({ rules: [{ status: 529 }] });
    const e = await anthropic()
      .messages.create({ model: "m", max_tokens: 64, messages }, { maxRetries: 2 })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(Anthropic.APIError);
    expect(fs.requests()).toBe(3); // not 9
    expect(retries()).toEqual([0, 1, 2]);
  });

  it("a give-up's answer says x-should-retry: false, so a layer that reads the server's word stops", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const e = (await openai()
      .chat.completions.create({ model: "m", messages })
      .catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
    expect(e.headers?.get("x-should-retry")).toBe("false");
  });

  it("a per-request timeout is each attempt's: a slow answer is a timeout, retried", async () => {
    fs.script({ rules: [{ headersDelayMs: 400, times: 2 }] });
    const started = performance.now();
    const r = await openai().chat.completions.create({ model: "m", messages }, { timeout: 150 });
    expect(r.choices[0]?.message.content).toBeTruthy();
    expect(fs.requests()).toBe(3);
    // Two attempts cut at 150 ms each, then the answer: not one cut of the whole call.
    expect(performance.now() - started).toBeGreaterThan(280);
  });

  it("a per-request timeout that never lets an answer through ends as a timeout, not a cancellation", async () => {
    fs.script({ rules: [{ headersDelayMs: 400 }] });
    const e = await openai()
      .chat.completions.create({ model: "m", messages }, { timeout: 100 })
      .catch((x: unknown) => x);
    expect(fs.requests()).toBe(3);
    expect(reasonOf(e)).toBe("attempt-timeout");
    expect(ledgerOf(e)?.attempts.map((a) => a.failure?.kind)).toEqual([
      "timeout",
      "timeout",
      "timeout",
    ]);
  });

  it("the client's own timeout is each attempt's too", async () => {
    fs.script({ rules: [{ headersDelayMs: 400, times: 1 }] });
    const client = openaiWith(
      new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test", timeout: 150 }),
      { policy: fast() },
    );
    const r = await client.chat.completions.create({ model: "m", messages });
    expect(r.choices[0]?.message.content).toBeTruthy();
    expect(fs.requests()).toBe(2);
  });

  it("a bad timeout is refused by name", async () => {
    const e = await openai()
      .chat.completions.create({ model: "m", messages }, { timeout: -5 })
      .catch((x: unknown) => x);
    expect(String(e)).toMatch(/openai\.withBreakwater: option "timeout".*-5/);
    expect(fs.requests()).toBe(0);
  });

  it("callOptions carries a call's own maxAttempts, deadline and attempt timeout, checked by name", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const client = openai();
    await client.chat.completions
      .create({ model: "m", messages }, callOptions({ maxAttempts: 1 }))
      .catch(() => {});
    expect(fs.requests()).toBe(1);
    fs.script({ rules: [{ headersDelayMs: 300 }] });
    fs.server.resetStats();
    const e = await client.chat.completions
      .create({ model: "m", messages }, callOptions({ attemptTimeoutMs: 80, deadlineMs: 200 }))
      .catch((x: unknown) => x);
    expect(["deadline", "attempts-exhausted"]).toContain(reasonOf(e));
    expect(fs.requests()).toBeGreaterThanOrEqual(2);
    expect(() => callOptions({ maxAttempts: 0 })).toThrow(
      /callOptions: option "maxAttempts".*got 0/,
    );
    expect(() => callOptions({ deadlineMs: -1 })).toThrow(/callOptions: option "deadlineMs"/);
    expect(() => callOptions({ hedge: true as never })).toThrow(/callOptions: option "hedge"/);
  });

  it("google: a per-request timeout is each attempt's, and its retryOptions stay at one attempt", async () => {
    fs.script({ rules: [{ headersDelayMs: 400, times: 1 }] });
    const ai = googleWith(
      new GoogleGenAI({ apiKey: "k", httpOptions: { baseUrl: fs.server.url } }),
      { policy: fast() },
    );
    const r = await ai.models.generateContent({
      model: "gemini-x",
      contents: "hi",
      config: { httpOptions: { timeout: 150, retryOptions: { attempts: 5 } } },
    });
    expect(r.text).toBeTruthy();
    expect(fs.requests()).toBe(2);
  });
});

describe("a wrapped client inside another policy's call is one attempt of it", () => {
  it("a fallback chain of wrapped clients: a persistent 500 reaches the primary maxAttempts times", async () => {
    fs.script({ rules: [{ model: "primary", status: 500 }] });
    const pa = fast();
    const pb = fast();
    const a = openai(pa);
    const b = openai(pb);
    const chain = fallback([
      {
        name: "a",
        policy: pa,
        call: () => a.chat.completions.create({ model: "primary", messages }),
      },
      {
        name: "b",
        policy: pb,
        call: () => b.chat.completions.create({ model: "backup", messages }),
      },
    ]);
    const r = await chain.execute();
    expect(r.model).toBe("backup");
    const primary = fs.server.stats().timeline.filter((x) => x.model === "primary");
    expect(primary.map((x) => x.retries)).toEqual([0, 1, 2]); // not 0,1,2,0,1,2,0,1,2
  });

  it("a user's own execute over a wrapped client: maxAttempts requests, the outer ledger agrees", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const p = fast();
    const client = openai(p);
    const e = await p
      .execute(() => client.chat.completions.create({ model: "m", messages }))
      .catch((x: unknown) => x);
    expect(fs.requests()).toBe(3);
    expect(retries()).toEqual([0, 1, 2]);
    expect(ledgerOf(e)?.attempts).toHaveLength(3);
    expect(reasonOf(e)).toBe("attempts-exhausted");
    // The outer call owns the retry: the SDK's error does not say "never again".
    expect((e as InstanceType<typeof OpenAI.APIError>).headers?.get("x-should-retry")).toBeNull();
  });

  it("the outer call's ledger holds what the wrapped client's requests spent", async () => {
    const p = fast();
    const client = openai(p);
    const ledgers: unknown[] = [];
    const outer = policy({ onSuccess: (e) => void ledgers.push(e.ledger) });
    await outer.execute(() => client.chat.completions.create({ model: "m", messages }));
    const ledger = ledgers[0] as { usage: { inputTokens: number; outputTokens: number } };
    expect(ledger.usage.inputTokens).toBeGreaterThan(0);
    expect(ledger.usage.outputTokens).toBeGreaterThan(0);
  });

  it("a pool of wrapped clients: the pool's ledger counts every request sent", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const pa = fast();
    const pb = fast();
    const a = openai(pa);
    const b = openai(pb);
    const p = pool(
      [
        {
          name: "a",
          policy: pa,
          call: () => a.chat.completions.create({ model: "dep-a", messages }),
        },
        {
          name: "b",
          policy: pb,
          call: () => b.chat.completions.create({ model: "dep-b", messages }),
        },
      ],
      { cooldownMs: 20 },
    );
    const e = await p.execute().catch((x: unknown) => x);
    const ledger = ledgerOf(e);
    expect(ledger?.attempts.length).toBe(fs.requests());
    // Each request is one attempt of the pool's call: none is a retry of the client's own.
    expect(fs.server.stats().timeline.map((a) => a.retries)).toEqual(
      ledger?.attempts.map((a) => a.attempt - 1),
    );
  });

  it("a streamed chain leg: the stream of a wrapped client is read once, and the chain's stream shows it", async () => {
    const p = fast();
    const client = openai(p);
    const chain = fallback([
      {
        name: "a",
        policy: p,
        open: () => client.chat.completions.create({ model: "m", messages, stream: true }),
      },
    ]);
    let text = "";
    for await (const chunk of chain.stream())
      text += (chunk as OpenAI.ChatCompletionChunk).choices[0]?.delta.content ?? "";
    expect(text).toBeTruthy();
    expect(fs.requests()).toBe(1);
  });
});
