import Anthropic from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { type BreakwaterError, failureOf, ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { withBreakwater } from "../../src/providers/anthropic.ts";
import { drain, TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const params = {
  model: "claude-test",
  max_tokens: 100,
  messages: [{ role: "user" as const, content: "three little words" }],
};
const client = () => {
  const t = testPolicy();
  return {
    ...t,
    ai: withBreakwater(
      new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test-0000000000" }),
      { policy: t.p },
    ),
  };
};
type Event = Anthropic.RawMessageStreamEvent;
const text = (events: Event[]) =>
  events
    .map((e) =>
      e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : "",
    )
    .join("");

describe("breakwater/anthropic against the fault server", () => {
  it("switches the SDK's own retries off", () => {
    expect(withBreakwater(new Anthropic({ baseURL: fs.server.url, apiKey: "k" })).maxRetries).toBe(
      0,
    );
  });

  it("429 with Retry-After: retried after the hinted wait", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 429, retryAfter: 1 }] });
    const { ai } = client();
    const r = await ai.messages.create(params);
    expect(r.content[0]).toMatchObject({ type: "text", text: TEXT });
    expect(fs.requests()).toBe(2);
    expect(fs.gap()).toBeGreaterThanOrEqual(995);
  });

  it("529 overloaded_error and 503 then 200: retried", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], status: 529 },
        { requests: [2, 2], status: 503 },
      ],
    });
    const { ai } = client();
    await ai.messages.create(params);
    expect(fs.requests()).toBe(3);
  });

  it.each([
    [
      "billing_error (a spent balance)",
      { status: 400, error: "insufficient_quota" as const },
      Anthropic.BadRequestError,
    ],
    [
      "a prompt that is too long",
      { status: 400, error: "context_length" as const },
      Anthropic.BadRequestError,
    ],
    ["a 401", { status: 401 }, Anthropic.AuthenticationError],
  ])("%s: one request, the SDK's own error class", async (_, rule, cls) => {
    fs.script({ rules: [rule] });
    const { ai } = client();
    const err = await ai.messages.create(params).catch((e) => e);
    expect(err).toBeInstanceOf(cls);
    expect(reasonOf(err)).toBe("not-retryable");
    expect(fs.requests()).toBe(1);
  });

  it("an error event in a 200 stream before the first delta is retried", async () => {
    fs.script({
      rules: [{ requests: [1, 1], stream: { after: 0, action: "error", error: "overloaded" } }],
    });
    const { ai } = client();
    const { chunks, error } = await drain(await ai.messages.create({ ...params, stream: true }));
    expect(error).toBeUndefined();
    expect(text(chunks)).toBe(TEXT);
    expect(chunks[0]!.type).toBe("message_start"); // held, then delivered in order
    expect(fs.requests()).toBe(2);
  });

  it("an error event after it is not retried: the SDK raises its own error, breakwater's reason on it", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "error", error: "overloaded" } }] });
    const { ai } = client();
    const { chunks, error } = await drain(await ai.messages.create({ ...params, stream: true }));
    expect(text(chunks)).toBe("The fault server ");
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(failureOf(error)?.kind).toBe("overloaded");
    // What the broken attempt spent: its input, and the deltas it sent.
    expect(ledgerOf(error)?.wasted).toEqual({ inputTokens: 3, outputTokens: 1 });
    expect(fs.requests()).toBe(1);
  });

  it("a stall mid-stream ends with the idle timeout; a cut connection interrupts", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 2, action: "stall" } },
        { requests: [2, 2], stream: { after: 2, action: "cut" } },
      ],
    });
    const { ai } = client();
    const stalled = await drain(await ai.messages.create({ ...params, stream: true }));
    expect((stalled.error as BreakwaterError).failure?.code).toBe("idle_timeout");
    const cut = await drain(await ai.messages.create({ ...params, stream: true }));
    expect(reasonOf(cut.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(2);
  });

  it("usage from message_start and message_delta matches what the server billed", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "error" } }] });
    const { ai, ledgers } = client();
    await drain(await ai.messages.create({ ...params, stream: true }));
    expect(ledgers[0]!.usage).toEqual({ inputTokens: 3, outputTokens: 10 });
    // The failed attempt had begun generating (message_start): its input tokens were billed.
    expect(ledgers[0]!.wasted).toEqual({ inputTokens: 3, outputTokens: 1 });
    expect(fs.server.stats().billed).toEqual({ inputTokens: 6, outputTokens: 10 });
  });
});
