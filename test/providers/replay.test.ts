import type { AddressInfo } from "node:net";
import { createServer } from "node:net";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { generateText, wrapLanguageModel } from "ai";
import fc from "fast-check";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { BreakwaterError, ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropicAdapter } from "../../src/providers/anthropic.ts";
import { anthropicEffect, googleEffect, openaiEffect } from "../../src/providers/effects.ts";
import { callOptions, withBreakwater } from "../../src/providers/openai.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

// Requests that change state on the server are never sent again blindly (rule 20): the real
// openai and anthropic clients against the fault server, whose stored conversations append
// a turn as each request arrives.
const fs = useFaultServer();
const KEY = "sk-test-000000000000";
const openai = (extra = {}, adapter = {}) => {
  const t = testPolicy({ attemptTimeoutMs: 250, ...extra });
  const ai = withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: KEY }), {
    policy: t.p,
    ...adapter,
  });
  return { ...t, ai };
};
const turns = () => fs.server.stats().conversations ?? {};
const firstSlow = { rules: [{ requests: [1, 1] as [number, number], headersDelayMs: 2_000 }] };
/** A loopback port nobody listens on (bound, then let go). */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
const caught = <T>(p: Promise<T>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe("a stored conversation's turn, through withBreakwater(new OpenAI())", () => {
  it("timed out after it was sent: not sent again, fails outcome-unknown; the turn is there once", async () => {
    fs.script(firstSlow);
    const { ai } = openai();
    const error = await caught(
      ai.responses.create({ model: "gpt-test", conversation: "conv_a", input: "refund order 77" }),
    );
    expect(reasonOf(error)).toBe("outcome-unknown");
    expect(error).toBeInstanceOf(OpenAI.APIConnectionError); // the SDK's own class, tagged
    expect(ledgerOf(error)?.attempts.map((a) => a.failure?.kind)).toEqual(["timeout"]);
    expect(fs.requests()).toBe(1);
    expect(turns()).toEqual({ conv_a: 1 }); // a blind resend would have made it 2
  });

  it("answered 503 (turned away, nothing done): retried, and it answers", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    const { ai } = openai();
    const r = await ai.responses.create({ model: "gpt-test", conversation: "conv_b", input: "hi" });
    expect(r.output_text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    expect(turns()).toEqual({ conv_b: 1 });
  });

  it("a 500 proves nothing (the work may be done): not sent again", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 500 }] });
    const { ai } = openai();
    const error = await caught(
      ai.responses.create({ model: "gpt-test", conversation: { id: "conv_c" }, input: "hi" }),
    );
    expect(reasonOf(error)).toBe("outcome-unknown");
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(fs.requests()).toBe(1);
  });

  it("connection refused (never arrived): retried as any call", async () => {
    const t = testPolicy({ attemptTimeoutMs: 250 });
    const port = await closedPort();
    const ai = withBreakwater(new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: KEY }), {
      policy: t.p,
    });
    const error = await caught(
      ai.responses.create({ model: "gpt-test", conversation: "conv_d", input: "hi" }),
    );
    expect(reasonOf(error)).toBe("attempts-exhausted");
    expect(ledgerOf(error)?.attempts.map((a) => a.failure?.code)).toEqual([
      "ECONNREFUSED",
      "ECONNREFUSED",
      "ECONNREFUSED",
    ]);
  });

  it("a stateless call that times out is retried as before, and answers", async () => {
    fs.script(firstSlow);
    const { ai } = openai();
    const r = await ai.responses.create({ model: "gpt-test", input: "hi" });
    expect(r.output_text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
  });

  it("previous_response_id with store: retried (the previous response is never changed)", async () => {
    fs.script(firstSlow);
    const { ai } = openai();
    const r = await ai.responses.create({
      model: "gpt-test",
      previous_response_id: "resp_before",
      store: true,
      input: "and then?",
    });
    expect(r.output_text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
  });

  it("a stream cut before content is not reopened: outcome-unknown", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "cut" } }] });
    const { ai } = openai();
    const error = await caught(
      (async () => {
        const s = await ai.responses.create({
          model: "gpt-test",
          conversation: "conv_s",
          input: "hi",
          stream: true,
        });
        for await (const _ of s);
      })(),
    );
    expect(reasonOf(error)).toBe("outcome-unknown");
    expect(fs.requests()).toBe(1);
    expect(turns()).toEqual({ conv_s: 1 });
  });

  it("marked safe by the caller (callOptions({ effect: 'idempotent' })): retried", async () => {
    fs.script(firstSlow);
    const { ai } = openai();
    const r = await ai.responses.create(
      { model: "gpt-test", conversation: "conv_e", input: "hi" },
      callOptions({ effect: "idempotent" }),
    );
    expect(r.output_text).toBe(TEXT);
    expect(turns()).toEqual({ conv_e: 2 }); // what the caller accepted
  });

  it("reconcile: the conversation's last items answer the call, nothing is sent again", async () => {
    fs.script(firstSlow);
    const seen: unknown[] = [];
    const { ai } = openai(
      {},
      {
        // Read the conversation: if the turn landed, answer from its last assistant item.
        reconcile: async ({ body, error }: { body: unknown; error: unknown }) => {
          seen.push(reasonOf(error));
          const conv = (body as { conversation: string }).conversation;
          const res = await fetch(`${fs.server.url}/v1/conversations/${conv}/items`);
          const items = (await res.json()) as {
            data: { role: string; content: { text: string }[] }[];
          };
          const last = items.data.find((i) => i.role === "assistant");
          if (last === undefined) return undefined;
          return {
            id: "resp_reconciled",
            object: "response",
            status: "completed",
            model: "gpt-test",
            output: [
              {
                type: "message",
                role: "assistant",
                content: [{ type: "output_text", text: last.content[0]!.text, annotations: [] }],
              },
            ],
          };
        },
      },
    );
    const r = await ai.responses.create({ model: "gpt-test", conversation: "conv_r", input: "hi" });
    expect(r.id).toBe("resp_reconciled");
    expect(r.output_text).toBe(TEXT);
    expect(seen).toEqual(["outcome-unknown"]);
    expect(fs.requests()).toBe(1);
    expect(turns()).toEqual({ conv_r: 1 });
  });

  it("reconcile that finds nothing lets the outcome-unknown error through", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 500 }] });
    const { ai } = openai({}, { reconcile: () => undefined });
    const error = await caught(
      ai.responses.create({ model: "gpt-test", conversation: "conv_n", input: "hi" }),
    );
    expect(reasonOf(error)).toBe("outcome-unknown");
  });

  it("a batch is created once: a timeout after it was sent is not resent", async () => {
    fs.script(firstSlow);
    const { ai } = openai();
    const error = await caught(
      ai.batches.create({
        input_file_id: "file-1",
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      }),
    );
    expect(reasonOf(error)).toBe("outcome-unknown");
    expect(fs.requests()).toBe(1);
  });

  it("bad per-call options are named", () => {
    expect(() => callOptions({ effect: "maybe" as never })).toThrow(
      /"effect" must be one of "read", "idempotent", "unsafe"/,
    );
    expect(() => withBreakwater(new OpenAI({ apiKey: KEY }), { reconcile: 3 as never })).toThrow(
      /reconcile/,
    );
  });
});

describe("anthropic", () => {
  const anthropic = () => {
    const t = testPolicy({ attemptTimeoutMs: 250 });
    return anthropicAdapter(new Anthropic({ baseURL: fs.server.url, apiKey: KEY }), {
      policy: t.p,
    });
  };

  it("a message batch that timed out after it was sent is not resent; a message is", async () => {
    fs.script(firstSlow);
    const error = await caught(
      anthropic().messages.batches.create({
        requests: [
          {
            custom_id: "a",
            params: {
              model: "claude-test",
              max_tokens: 10,
              messages: [{ role: "user", content: "hi" }],
            },
          },
        ],
      }),
    );
    expect(reasonOf(error)).toBe("outcome-unknown");
    expect(fs.requests()).toBe(1);
    fs.script(firstSlow);
    fs.server.resetStats();
    const m = await anthropic().messages.create({
      model: "claude-test",
      max_tokens: 50,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(m.content[0]).toMatchObject({ type: "text" });
    expect(fs.requests()).toBe(2);
  });
});

describe("the AI SDK middleware", () => {
  const model = () => {
    const t = testPolicy({ attemptTimeoutMs: 250 });
    const provider = createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: KEY });
    return wrapLanguageModel({
      model: provider.responses("gpt-test"),
      middleware: breakwaterMiddleware({ policy: t.p }),
    });
  };

  it("a generateText naming a stored conversation is not sent again after a timeout", async () => {
    fs.script(firstSlow);
    const error = await caught(
      generateText({
        model: model(),
        prompt: "hi",
        maxRetries: 0,
        providerOptions: { openai: { conversation: "conv_ai" } },
      }),
    );
    expect(reasonOf(error)).toBe("outcome-unknown");
    expect(fs.requests()).toBe(1);
    expect(turns()).toEqual({ conv_ai: 1 });
  });

  it("marked safe (providerOptions.breakwater.effect), or stateless: retried", async () => {
    fs.script(firstSlow);
    const r = await generateText({
      model: model(),
      prompt: "hi",
      maxRetries: 0,
      providerOptions: {
        openai: { conversation: "conv_ok" },
        breakwater: { effect: "idempotent" },
      },
    });
    expect(r.text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    fs.server.resetStats();
    fs.script(firstSlow);
    expect((await generateText({ model: model(), prompt: "hi", maxRetries: 0 })).text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
  });

  it("a bad effect is named", async () => {
    const error = await caught(
      generateText({
        model: model(),
        prompt: "hi",
        maxRetries: 0,
        providerOptions: { breakwater: { effect: "sometimes" } },
      }),
    );
    expect(String(error)).toMatch(
      /"providerOptions.breakwater.effect" must be "read", "idempotent" or "unsafe"/,
    );
  });
});

describe("which requests are unsafe", () => {
  it.each([
    ["POST", "https://api.openai.com/v1/responses", { conversation: "conv_1" }, "unsafe"],
    ["POST", "https://api.openai.com/v1/responses", { background: true }, "unsafe"],
    [
      "POST",
      "https://api.openai.com/v1/responses",
      { previous_response_id: "r", store: true },
      "idempotent",
    ],
    ["POST", "https://api.openai.com/v1/responses", { conversation: null }, "idempotent"],
    ["POST", "https://api.openai.com/v1/chat/completions", { store: true }, "idempotent"],
    ["POST", "https://api.openai.com/v1/conversations/conv_1/items", {}, "unsafe"],
    ["POST", "https://api.openai.com/v1/threads/t_1/runs", {}, "unsafe"],
    ["POST", "https://api.openai.com/v1/threads/runs", {}, "unsafe"],
    ["POST", "https://api.openai.com/v1/threads/t_1/messages", {}, "unsafe"],
    ["POST", "https://api.openai.com/v1/threads/t/runs/r/submit_tool_outputs", {}, "unsafe"],
    ["POST", "https://api.openai.com/v1/batches", {}, "unsafe"],
    ["POST", "https://api.openai.com/v1/files", undefined, "unsafe"],
    ["POST", "https://api.openai.com/v1/fine_tuning/jobs", {}, "unsafe"],
    ["GET", "https://api.openai.com/v1/conversations/conv_1/items?limit=1", undefined, "read"],
    ["POST", "https://api.openai.com/v1/embeddings", {}, "idempotent"],
  ] as const)("openai %s %s %j: %s", (method, url, body, effect) => {
    expect(openaiEffect(method, url, body)).toBe(effect);
  });

  it("the same request read again, between others, reads the same (each table keeps its last)", () => {
    const pool = [
      ["POST", "https://api.openai.com/v1/batches", "unsafe", "idempotent"],
      ["POST", "https://api.openai.com/v1/batches?x=1", "unsafe", "idempotent"],
      ["GET", "https://api.openai.com/v1/batches", "read", "read"],
      ["POST", "https://api.openai.com/v1/embeddings", "idempotent", "idempotent"],
      ["POST", "https://api.openai.com/v1/files", "unsafe", "unsafe"],
      ["DELETE", "https://api.openai.com/v1/files", "idempotent", "idempotent"],
    ] as const;
    fc.assert(
      fc.property(fc.array(fc.nat(pool.length - 1), { maxLength: 40 }), (order) => {
        for (const i of order) {
          const [method, url, effect, anthropics] = pool[i]!;
          expect(openaiEffect(method, url, {})).toBe(effect);
          // Another table's reading in between changes nothing of this one's.
          expect(anthropicEffect(method, url)).toBe(anthropics);
        }
      }),
    );
  });

  it("anthropic and google", () => {
    expect(anthropicEffect("POST", "https://api.anthropic.com/v1/messages/batches")).toBe("unsafe");
    expect(anthropicEffect("POST", "https://api.anthropic.com/v1/messages")).toBe("idempotent");
    const g = "https://generativelanguage.googleapis.com/v1beta";
    expect(googleEffect("POST", `${g}/models/gemini-2.5-flash:batchGenerateContent`)).toBe(
      "unsafe",
    );
    expect(googleEffect("POST", `${g}/cachedContents`)).toBe("unsafe");
    expect(googleEffect("POST", `${g}/models/gemini-2.5-flash:generateContent`)).toBe("idempotent");
    expect(googleEffect("GET", `${g}/cachedContents/c1`)).toBe("read");
  });

  it("a BreakwaterError says what to do", () => {
    const e = new BreakwaterError("outcome-unknown", {});
    expect(e.message).toMatch(/changes state on the server.*not sent again/);
  });
});
