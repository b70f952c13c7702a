import OpenAI, { AzureOpenAI } from "openai";
import { describe, expect, it } from "vitest";
import { type BreakwaterError, ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { callOptions, withBreakwater } from "../../src/providers/openai.ts";
import { drain, TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "three little words" }];
const client = (extra = {}) => {
  const t = testPolicy(extra);
  return {
    ...t,
    ai: withBreakwater(
      new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test-000000000000" }),
      { policy: t.p },
    ),
  };
};
const text = (chunks: OpenAI.ChatCompletionChunk[]) =>
  chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");

describe("breakwater/openai against the fault server", () => {
  it("switches the SDK's own retries off", () => {
    const raw = new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" });
    expect(raw.maxRetries).toBe(2);
    expect(withBreakwater(raw).maxRetries).toBe(0);
  });

  it("an AzureOpenAI client keeps its api-version and deployment, and is retried by breakwater", async () => {
    const urls: string[] = [];
    const answers = [503, 200];
    const azure = new AzureOpenAI({
      apiKey: "k",
      endpoint: "http://azure.local",
      apiVersion: "2024-10-21",
      deployment: "dep-1",
      fetch: async (url) => {
        urls.push(String(url));
        const status = answers.shift() ?? 200;
        return status === 200
          ? fetch(`${fs.server.url}/v1/chat/completions`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ model: "gpt-test", messages }),
            })
          : new Response('{"error":{"message":"busy"}}', {
              status,
              headers: { "content-type": "application/json" },
            });
      },
    });
    const wrapped = withBreakwater(azure, { policy: testPolicy().p });
    const r = await wrapped.chat.completions.create({ model: "gpt-test", messages });
    expect(r.choices[0]!.message.content).toBe(TEXT);
    expect(wrapped.maxRetries).toBe(0);
    expect(urls).toHaveLength(2);
    for (const u of urls)
      expect(u).toBe(
        "http://azure.local/openai/deployments/dep-1/chat/completions?api-version=2024-10-21",
      );
  });

  it("429 with retry-after-ms: retried after the hinted wait", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 429, retryAfterMs: 300 }] });
    const { ai } = client();
    const r = await ai.chat.completions.create({ model: "gpt-test", messages });
    expect(r.choices[0]!.message.content).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    expect(fs.gap()).toBeGreaterThanOrEqual(295);
  });

  it("529 overloaded and 503 then 200: retried", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], status: 529 },
        { requests: [2, 2], status: 503 },
      ],
    });
    const { ai } = client();
    await ai.chat.completions.create({ model: "gpt-test", messages });
    expect(fs.requests()).toBe(3);
  });

  it.each([
    [
      "a spent quota (429 insufficient_quota)",
      { status: 429, error: "insufficient_quota" as const },
      OpenAI.RateLimitError,
    ],
    [
      "a context-length 400",
      { status: 400, error: "context_length" as const },
      OpenAI.BadRequestError,
    ],
    ["a 401", { status: 401 }, OpenAI.AuthenticationError],
  ])("%s: one request, the SDK's own error class", async (_, rule, cls) => {
    fs.script({ rules: [rule] });
    const { ai } = client();
    const err = await ai.chat.completions.create({ model: "gpt-test", messages }).catch((e) => e);
    expect(err).toBeInstanceOf(cls);
    expect(reasonOf(err)).toBe("not-retryable");
    expect(fs.requests()).toBe(1);
  });

  it("an in-band error before the first delta is retried; the consumer sees one clean answer", async () => {
    fs.script({
      rules: [{ requests: [1, 1], stream: { after: 0, action: "error", error: "server_error" } }],
    });
    const { ai } = client();
    const { chunks, error } = await drain(
      await ai.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(error).toBeUndefined();
    expect(text(chunks)).toBe(TEXT);
    expect(fs.requests()).toBe(2);
  });

  it("an in-band error after it is not retried: the SDK raises its own error, breakwater's reason on it", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "error", error: "server_error" } }] });
    const { ai } = client();
    const { chunks, error } = await drain(
      await ai.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(text(chunks)).toBe("The fault server ");
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(ledgerOf(error)?.attempts).toHaveLength(1);
    expect(fs.requests()).toBe(1);
  });

  it("a stall mid-stream ends with the idle timeout", async () => {
    fs.script({ rules: [{ stream: { after: 2, action: "stall" } }] });
    const { ai } = client();
    const { error } = await drain(
      await ai.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect((error as BreakwaterError).failure?.code).toBe("idle_timeout");
    expect(fs.requests()).toBe(1);
  });

  it("a cut connection: retried before content, interrupted after", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 0, action: "cut" } },
        { requests: [2, 2], stream: { after: 4, action: "cut" } },
      ],
    });
    const { ai } = client();
    const { chunks, error } = await drain(
      await ai.chat.completions.create({ model: "gpt-test", messages, stream: true }),
    );
    expect(text(chunks)).toBe("The fault server says ");
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect((error as BreakwaterError).failure?.kind).toBe("transport");
    expect(fs.requests()).toBe(2);
  });

  it("usage and the ledger match what the server billed (usage chunk asked for)", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    const { ai, ledgers } = client();
    await ai.chat.completions.create({ model: "gpt-test", messages });
    const s = await ai.chat.completions.create({ model: "gpt-test", messages, stream: true });
    const { chunks } = await drain(s);
    expect(chunks.at(-1)?.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 10 });
    expect(ledgers[0]!.billed).toEqual({ inputTokens: 3, outputTokens: 10 });
    expect(ledgers[1]!.billed).toEqual({ inputTokens: 3, outputTokens: 10 });
    expect(fs.server.stats().billed).toEqual({ inputTokens: 6, outputTokens: 20 });
  });

  it("gives up with the ledger reachable and keys redacted", async () => {
    fs.script({
      rules: [
        { status: 503, message: "upstream said: key sk-live-abcdefghijklmnopqrstu is wrong" },
      ],
    });
    const { ai } = client();
    const err = await ai.chat.completions.create({ model: "gpt-test", messages }).catch((e) => e);
    expect(reasonOf(err)).toBe("attempts-exhausted");
    expect(ledgerOf(err)?.attempts).toHaveLength(3);
    expect(String(err.message)).not.toContain("abcdefghijklmnopqrstu");
  });
});

describe("breakwater/openai: the Responses API", () => {
  type Event = { type: string; delta?: string };
  const deltas = (events: Event[]) =>
    events.map((e) => (e.type === "response.output_text.delta" ? e.delta : "")).join("");

  it("responses.create: retried after a 503; output_text and usage as the server billed", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    const { ai, ledgers } = client();
    const r = await ai.responses.create({ model: "gpt-test", input: "three little words" });
    expect(r.output_text).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    expect(ledgers[0]!.usage).toEqual({ inputTokens: 3, outputTokens: 10 });
    expect(fs.server.stats().billed).toEqual({ inputTokens: 3, outputTokens: 10 });
  });

  it("streaming: an error event before the first delta is retried; after it, interrupted", async () => {
    fs.script({
      rules: [
        { requests: [1, 1], stream: { after: 0, action: "error", error: "server_error" } },
        { requests: [3, 3], stream: { after: 2, action: "error", error: "server_error" } },
      ],
    });
    const { ai } = client();
    const ok = await drain(
      (await ai.responses.create({
        model: "gpt-test",
        input: "hi",
        stream: true,
      })) as AsyncIterable<Event>,
    );
    expect(ok.error).toBeUndefined();
    expect(deltas(ok.chunks)).toBe(TEXT);
    const broken = await drain(
      (await ai.responses.create({
        model: "gpt-test",
        input: "hi",
        stream: true,
      })) as AsyncIterable<Event>,
    );
    expect(deltas(broken.chunks)).toBe("The fault ");
    // Once content was shown the `error` event reaches the SDK as it came, nothing retried:
    // openai 7 raises its APIError for it (6 handed it on as an event), tagged as cut.
    expect(broken.error).toBeInstanceOf(OpenAI.APIError);
    expect(reasonOf(broken.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(3);
  });
});

describe("breakwater/openai: runs", () => {
  it("calls draw on the adapter's run, or on the run given per request", async () => {
    const { Run } = await import("../../src/run/run.ts");
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    const adapterRun = new Run();
    const t = testPolicy();
    const ai = withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: t.p,
      run: () => adapterRun,
    });
    await ai.chat.completions.create({ model: "gpt-test", messages });
    expect(adapterRun.stats).toMatchObject({ calls: 1, attempts: 2, retries: 1 });
    expect(adapterRun.billed).toEqual({ inputTokens: 3, outputTokens: 10 });
    const own = new Run({ maxAttempts: 1 });
    fs.script({ rules: [{ status: 503 }] });
    const err = await ai.chat.completions
      .create({ model: "gpt-test", messages }, callOptions({ run: own }))
      .catch((e) => e);
    expect(reasonOf(err)).toBe("run-attempts");
    expect(own.stats.attempts).toBe(1);
    expect(adapterRun.stats.calls).toBe(1);
  });
});
