import { createOpenAI } from "@ai-sdk/openai";
import { APICallError, generateText, streamText, wrapLanguageModel } from "ai";
import { describe, expect, it } from "vitest";
import type { BreakwaterError } from "../../src/core/errors.ts";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const model = (extra: Parameters<typeof testPolicy>[0] = {}) => {
  const t = testPolicy(extra);
  const provider = createOpenAI({
    baseURL: `${fs.server.url}/v1`,
    apiKey: "sk-test-0000000000000000",
  });
  return {
    ...t,
    model: wrapLanguageModel({
      model: provider.chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: t.p }),
    }),
  };
};
const prompt = "three little words";

/** Streams and collects text and the error parts, the way an app reads fullStream. */
/** Reads a stream as an app does: its text, the error parts and onError calls it saw, and
 * the error its iteration threw (how a give-up reaches the app: no error part that
 * `streamRetries` would take as a cue to call the model again). */
async function stream(
  m: ReturnType<typeof model>["model"],
  extra: { streamRetries?: number } = {},
) {
  const told: unknown[] = [];
  const r = streamText({
    model: m,
    prompt,
    maxRetries: 0,
    ...extra,
    onError: ({ error }) => void told.push(error),
  });
  let text = "";
  const errors: unknown[] = [];
  try {
    for await (const part of r.fullStream) {
      if (part.type === "text-delta") text += part.text;
      if (part.type === "error") errors.push(part.error);
    }
  } catch (error) {
    errors.push(error);
  }
  return { text, errors, told };
}

describe("breakwater/ai-sdk middleware against the fault server", () => {
  it("the limits a stream's headers tell are learned: the next call is refused before it is sent", async () => {
    fs.script({ rateLimit: { requestsPerMinute: 1 } });
    const { model: m } = model({ deadlineMs: 2_000 });
    expect((await stream(m)).text).toBe(TEXT);
    const e = await generateText({ model: m, prompt, maxRetries: 0 }).catch((x: unknown) => x);
    expect([reasonOf(e), fs.requests()]).toEqual(["rate-limit-wait", 1]);
  });

  it("generateText: 429 with Retry-After retried after the hint; usage from the result", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 429, retryAfterMs: 300 }] });
    const { model: m, ledgers } = model();
    const r = await generateText({ model: m, prompt, maxRetries: 0 });
    expect(r.text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    expect(fs.gap()).toBeGreaterThanOrEqual(295);
    expect(ledgers[0]!.usage).toEqual({ inputTokens: 3, outputTokens: 10 });
  });

  it("529 and 503 then 200: retried", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], status: 529 },
        { requests: [2, 2], status: 503 },
      ],
    });
    const { model: m } = model();
    expect((await generateText({ model: m, prompt, maxRetries: 0 })).text).toBe(TEXT);
    expect(fs.requests()).toBe(3);
  });

  it.each([
    [
      "a spent quota 429 (isRetryable says yes; breakwater says no)",
      { status: 429, error: "insufficient_quota" as const },
    ],
    ["a context-length 400", { status: 400, error: "context_length" as const }],
    ["a 401", { status: 401 }],
  ])("%s: one request, APICallError", async (_, rule) => {
    fs.script({ rules: [rule] });
    const { model: m } = model();
    const err = await generateText({ model: m, prompt, maxRetries: 0 }).catch((e) => e);
    expect(APICallError.isInstance(err)).toBe(true);
    expect(reasonOf(err)).toBe("not-retryable");
    expect(fs.requests()).toBe(1);
  });

  it.each([
    ["a constant 503", { status: 503 }, 3],
    ["a spent quota 429", { status: 429, error: "insufficient_quota" as const }, 1],
  ])(
    "the AI SDK's own maxRetries (2 when unset) over %s: the give-up says isRetryable: false, the policy's requests only",
    async (_, rule, n) => {
      fs.script({ rules: [rule] });
      const { model: m } = model();
      const err = await generateText({ model: m, prompt }).catch((e) => e);
      expect(APICallError.isInstance(err) && err.isRetryable).toBe(false);
      expect(fs.requests()).toBe(n);
      fs.server.resetStats();
      const told: unknown[] = [];
      const s = streamText({ model: m, prompt, onError: ({ error }) => void told.push(error) });
      await s.consumeStream();
      expect(told.map((e) => APICallError.isInstance(e) && e.isRetryable)).toEqual([false]);
      expect(fs.requests()).toBe(n);
    },
  );

  it("after a give-up, the caller's own new call with the same messages is sent: only a retry of the same call is refused", async () => {
    fs.script({ rules: [{ status: 503, times: 3 }] });
    const { model: m } = model();
    const messages = [{ role: "user" as const, content: prompt }];
    const err = await generateText({ model: m, messages }).catch((e) => e);
    expect([APICallError.isInstance(err), fs.requests()]).toEqual([true, 3]);
    expect((await generateText({ model: m, messages })).text).toBe(TEXT);
    expect(fs.requests()).toBe(4);
  });

  it("streamText: an error part before the first delta is retried", async () => {
    fs.script({
      rules: [{ requests: [1, 1], stream: { after: 0, action: "error", error: "server_error" } }],
    });
    const { model: m } = model();
    const r = await stream(m);
    expect(r.errors).toEqual([]);
    expect(r.text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
  });

  it("streamText: raw chunks (read for errors a provider's parser drops) reach only a caller who asked", async () => {
    const count = async (includeRawChunks: boolean) => {
      const { model: m } = model();
      const r = streamText({ model: m, prompt, maxRetries: 0, includeRawChunks });
      let raw = 0;
      for await (const part of r.fullStream) if (part.type === "raw") raw++;
      return raw;
    };
    expect(await count(false)).toBe(0);
    expect(await count(true)).toBeGreaterThan(3);
  });

  it("streamText: an error after content is not retried; the stream ends with the interruption", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "error", error: "server_error" } }] });
    const { model: m } = model();
    const r = await stream(m);
    expect(r.text).toBe("The fault server ");
    expect(r.errors).toHaveLength(1);
    expect((r.errors[0] as BreakwaterError).reason).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);
  });

  it("streamRetries: 2, an error after content: the text shown once, one request, the interruption thrown", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "error", error: "server_error" } }] });
    const { model: m } = model();
    const r = await stream(m, { streamRetries: 2 });
    expect(r.text).toBe("The fault server ");
    expect(r.errors.map(reasonOf)).toEqual(["stream-interrupted"]);
    expect(fs.requests()).toBe(1);
  });

  it("streamRetries: 2, a stream cut before content every time: the policy's 3 attempts, not 9", async () => {
    fs.script({ rules: [{ stream: { after: 0, action: "cut" } }] });
    const { model: m } = model();
    const r = await stream(m, { streamRetries: 2 });
    expect(r.text).toBe("");
    expect(r.errors.map((e) => ledgerOf(e)?.attempts.length)).toEqual([3]);
    expect(fs.requests()).toBe(3);
  });

  it("streamText: a stall mid-stream ends with the idle timeout; a cut connection interrupts", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 2, action: "stall" } },
        { requests: [2, 2], stream: { after: 2, action: "cut" } },
      ],
    });
    const { model: m } = model();
    const stalled = await stream(m);
    expect((stalled.errors[0] as BreakwaterError).failure?.code).toBe("idle_timeout");
    const cut = await stream(m);
    expect(cut.text).toBe("The fault ");
    expect(cut.errors.length).toBeGreaterThan(0);
    expect(fs.requests()).toBe(2);
  });
});
