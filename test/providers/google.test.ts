import { ApiError, GoogleGenAI } from "@google/genai";
import { describe, expect, it } from "vitest";
import { BreakwaterError, failureOf, reasonOf } from "../../src/core/errors.ts";
import { withBreakwater } from "../../src/providers/google.ts";
import { drain, TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const params = { model: "gemini-test", contents: "three little words" };
const client = () => {
  const t = testPolicy();
  return {
    ...t,
    ai: withBreakwater(
      new GoogleGenAI({
        apiKey: "AIza-test-00000000000000000000",
        httpOptions: { baseUrl: fs.server.url },
      }),
      { policy: t.p },
    ),
  };
};
type Chunk = { text?: string };
const text = (chunks: Chunk[]) => chunks.map((c) => c.text ?? "").join("");

describe("breakwater/google against the fault server", () => {
  it("429 RESOURCE_EXHAUSTED with RetryInfo: retried after the hinted delay", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 429, retryAfter: 0.3 }] });
    const { ai, ledgers } = client();
    const r = await ai.models.generateContent(params);
    expect(r.text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    expect(fs.gap()).toBeGreaterThanOrEqual(295);
    expect(ledgers[0]!.attempts[0]!.failure).toMatchObject({
      kind: "rate_limited",
      code: "RESOURCE_EXHAUSTED",
      retryAfterMs: 300,
    });
  });

  it("503 UNAVAILABLE and 529: retried", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], status: 503 },
        { requests: [2, 2], status: 529 },
      ],
    });
    const { ai } = client();
    await ai.models.generateContent(params);
    expect(fs.requests()).toBe(3);
  });

  it.each([
    [
      "a spent daily quota (QuotaFailure PerDay)",
      { status: 429, error: "insufficient_quota" as const },
      "quota_exhausted",
    ],
    ["a context-length 400", { status: 400, error: "context_length" as const }, "context_exceeded"],
    ["a 401", { status: 401 }, "auth"],
  ])("%s: one request, the SDK's ApiError", async (_, rule, kind) => {
    fs.script({ rules: [rule] });
    const { ai, gaveUp } = client();
    const err = await ai.models.generateContent(params).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    // @google/genai builds its error from the body alone: breakwater's word is in onGiveUp.
    expect(gaveUp.map((e) => [e.reason, e.failure?.kind])).toEqual([["not-retryable", kind]]);
    expect(fs.requests()).toBe(1);
  });

  it("streams: an error chunk before content is retried; after content it interrupts", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 0, action: "error" } },
        { requests: [3, 3], stream: { after: 2, action: "error" } },
      ],
    });
    const { ai, gaveUp } = client();
    const ok = await drain((await ai.models.generateContentStream(params)) as AsyncIterable<Chunk>);
    expect(ok.error).toBeUndefined();
    expect(text(ok.chunks)).toBe(TEXT);
    const broken = await drain(
      (await ai.models.generateContentStream(params)) as AsyncIterable<Chunk>,
    );
    expect(text(broken.chunks)).toBe("The fault ");
    // Breakwater's, with the reason on it: the SDK's ApiError from the chunk keeps no headers
    // to read the call's outcome from.
    expect(broken.error).toBeInstanceOf(BreakwaterError);
    expect([reasonOf(broken.error), failureOf(broken.error)?.kind]).toEqual([
      "stream-interrupted",
      "overloaded",
    ]);
    expect(gaveUp.map((e) => [e.reason, e.failure?.kind])).toEqual([
      ["stream-interrupted", "overloaded"],
    ]);
    expect(fs.requests()).toBe(3);
  });

  it("a stall mid-stream ends with the idle timeout; a cut connection interrupts", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 2, action: "stall" } },
        { requests: [2, 2], stream: { after: 2, action: "cut" } },
      ],
    });
    const { ai } = client();
    const stalled = await drain(
      (await ai.models.generateContentStream(params)) as AsyncIterable<Chunk>,
    );
    expect((stalled.error as BreakwaterError).failure?.code).toBe("idle_timeout");
    const cut = await drain(
      (await ai.models.generateContentStream(params)) as AsyncIterable<Chunk>,
    );
    expect(reasonOf(cut.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(2);
  });

  it("usageMetadata and the ledger match what the server billed", async () => {
    const { ai, ledgers } = client();
    await ai.models.generateContent(params);
    await drain((await ai.models.generateContentStream(params)) as AsyncIterable<Chunk>);
    expect(ledgers[0]!.billed).toEqual({ inputTokens: 3, outputTokens: 10 });
    expect(ledgers[1]!.billed).toEqual({ inputTokens: 3, outputTokens: 10 });
    expect(fs.server.stats().billed).toEqual({ inputTokens: 6, outputTokens: 20 });
  });

  it("a resumable stream cut after content: the SDK resumes from its checkpoint, each hop a request counted on the run", async () => {
    const { Run } = await import("../../src/run/run.ts");
    fs.script({
      checkpoints: true,
      rules: [{ requests: [1, 1], stream: { after: 3, action: "cut" } }],
    });
    const run = new Run();
    const ai = withBreakwater(
      new GoogleGenAI({
        apiKey: "AIza-test-00000000000000000000",
        httpOptions: { baseUrl: fs.server.url },
      }),
      { policy: testPolicy().p, run },
    );
    const resumed = await drain(
      (await ai.models.generateContentStream(params)) as AsyncIterable<Chunk>,
    );
    expect(resumed.error).toBeUndefined();
    expect(text(resumed.chunks)).toBe(TEXT); // three words, then the rest after the checkpoint
    expect(fs.requests()).toBe(2);
    expect(run.stats).toMatchObject({ calls: 2, attempts: 2 });
    // Turned off, the cut ends the stream (breakwater does not replay what was shown).
    fs.script({
      checkpoints: true,
      rules: [{ requests: [1, 1], stream: { after: 3, action: "cut" } }],
    });
    const off = await drain(
      (await ai.models.generateContentStream({
        ...params,
        config: { automaticContinuation: false },
      })) as AsyncIterable<Chunk>,
    );
    expect(text(off.chunks)).toBe("The fault server ");
    expect(reasonOf(off.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(3);
  });
});
