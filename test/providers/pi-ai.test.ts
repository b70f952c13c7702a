import * as pi from "@mariozechner/pi-ai";
import { afterEach, describe, expect, it } from "vitest";
import { classify } from "../../src/core/classify.ts";
import { ledgerOf, partialOf, reasonOf } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import { withBreakwater } from "../../src/providers/pi-ai.ts";
import { piFailure } from "../../src/providers/pi-ai-errors.ts";
import { TEXT, useFaultServer, useWarnings } from "./fixture.ts";

// pi-ai (@mariozechner/pi-ai) against the fault server, its built-in providers (the openai
// and anthropic SDKs it bundles) under breakwater through its own provider registry.
const fs = useFaultServer();
const context = () => ({
  messages: [{ role: "user" as const, content: "hi", timestamp: Date.now() }],
});
const fast = () => policy({ maxAttempts: 3, backoff: { baseMs: 5, capMs: 10 } });
const MODELS = {
  "openai-responses": () => ({
    ...pi.getModel("openai", "gpt-4o-mini"),
    baseUrl: `${fs.server.url}/v1`,
  }),
  "openai-completions": () => ({
    ...pi.getModel("openai", "gpt-4o-mini"),
    api: "openai-completions" as const,
    baseUrl: `${fs.server.url}/v1`,
  }),
  "anthropic-messages": () => ({
    ...pi.getModel("anthropic", "claude-sonnet-4-5"),
    baseUrl: fs.server.url,
  }),
};
const APIS = Object.keys(MODELS) as (keyof typeof MODELS)[];
const opts = { apiKey: "sk-test" };

const warnings = useWarnings();
afterEach(() => pi.resetApiProviders()); // each test wraps the registry it needs

async function read(s: ReturnType<typeof pi.stream>) {
  const types: string[] = [];
  for await (const e of s) types.push(e.type);
  return { types, message: await s.result() };
}

describe("pi-ai under withBreakwater: one layer", () => {
  it("without breakwater, the SDK inside pi-ai retries on its own (the layer that multiplies)", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const m = await pi.complete(MODELS["openai-completions"]() as never, context(), opts);
    expect([m.stopReason, fs.requests()]).toEqual(["error", 3]); // under 3 attempts of yours: 9
  });

  it.each(APIS)(
    "%s: an endless 503 is the policy's 3 requests; the message says why and carries the ledger",
    async (api) => {
      withBreakwater(pi, { policy: fast() });
      fs.script({ rules: [{ status: 503 }] });
      const m = await pi.complete(MODELS[api]() as never, context(), opts);
      expect(m.stopReason).toBe("error");
      expect(m.errorMessage).toMatch(/^503 .*\(breakwater: attempts-exhausted\)$/);
      expect(fs.requests()).toBe(3);
      expect(reasonOf(m)).toBe("attempts-exhausted");
      expect(ledgerOf(m)?.attempts).toHaveLength(3);
    },
  );

  it.each(APIS)("%s: 503 twice, then the answer", async (api) => {
    withBreakwater(pi, { policy: fast() });
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    const m = await pi.complete(MODELS[api]() as never, context(), opts);
    expect([m.stopReason, m.content, fs.requests()]).toEqual([
      "stop",
      [expect.objectContaining({ text: TEXT })],
      3,
    ]);
  });

  it.each(APIS)("%s: a context-length 400 is sent once", async (api) => {
    withBreakwater(pi, { policy: fast() });
    fs.script({ rules: [{ status: 400, error: "context_length" }] });
    const m = await pi.complete(MODELS[api]() as never, context(), opts);
    expect([reasonOf(m), fs.requests()]).toEqual(["not-retryable", 1]);
  });

  it.each(APIS)(
    "%s: a stream cut before content is retried unseen; one cut after content is shown once",
    async (api) => {
      withBreakwater(pi, { policy: fast() });
      fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "cut" } }] });
      const ok = await read(pi.stream(MODELS[api]() as never, context(), opts));
      expect(ok.types.filter((t) => t === "error")).toEqual([]);
      expect(ok.message.content).toEqual([expect.objectContaining({ text: TEXT })]);
      expect(fs.requests()).toBe(2);
      fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
      fs.server.resetStats();
      const cut = await read(pi.stream(MODELS[api]() as never, context(), opts));
      expect(cut.types.at(-1)).toBe("error");
      expect(cut.message.content).toEqual([expect.objectContaining({ text: "The fault server " })]);
      expect(reasonOf(cut.message)).toBe("stream-interrupted");
      expect(partialOf(cut.message)?.chunks.length).toBeGreaterThan(0);
      expect(fs.requests()).toBe(1);
    },
  );

  it("a caller's maxRetries is ignored, said once; the caller's abort ends the call as aborted, not retried", async () => {
    withBreakwater(pi, { policy: fast() });
    fs.script({ rules: [{ status: 503 }] });
    const m = await pi.complete(MODELS["openai-completions"]() as never, context(), {
      ...opts,
      maxRetries: 4,
    });
    expect(fs.requests()).toBe(3);
    await pi.complete(MODELS["openai-completions"]() as never, context(), {
      ...opts,
      maxRetries: 4,
    });
    expect(m.stopReason).toBe("error");
    expect(
      (await warnings.settled()).filter((w) => w.includes("maxRetries (4) is ignored")),
    ).toHaveLength(1);
    fs.script({ rules: [{ headersDelayMs: 2_000 }] });
    fs.server.resetStats();
    const signal = AbortSignal.timeout(100);
    const aborted = await pi.complete(MODELS["openai-completions"]() as never, context(), {
      ...opts,
      signal,
    });
    expect([aborted.stopReason, reasonOf(aborted), fs.requests()]).toEqual([
      "aborted",
      "cancelled",
      1,
    ]);
  });

  it("wrapping again replaces the policy (the originals are wrapped, not the wrappers)", async () => {
    withBreakwater(pi, { policy: fast() });
    withBreakwater(pi, { policy: policy({ maxAttempts: 2, backoff: { baseMs: 5, capMs: 10 } }) });
    fs.script({ rules: [{ status: 503 }] });
    await pi.complete(MODELS["openai-completions"]() as never, context(), opts);
    expect(fs.requests()).toBe(2);
  });

  it("refuses what is not pi-ai's module, and bad options, by name", () => {
    expect(() => withBreakwater({} as never)).toThrow(
      /withBreakwater \(breakwater\/pi-ai\).*pi-ai's module/,
    );
    expect(() => withBreakwater(pi, { maxAttempts: 3 } as never)).toThrow(/maxAttempts/);
  });
});

describe("pi-ai's error words, read back", () => {
  it.each([
    ["503 Overloaded", "overloaded"],
    [
      '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
      "overloaded",
    ],
    ["429 Rate limit reached for requests. Please try again later.", "rate_limited"],
    ["400 This model's maximum context length is 128000 tokens", "context_exceeded"],
    ["401 Incorrect API key provided", "auth"],
    ["Connection error.", "transport"],
    ["Request timed out.", "timeout"],
    ["terminated", "transport"],
    ["Cannot read properties of undefined (reading 'x')", "unknown"],
  ])("%s: %s", (words, kind) => {
    expect(classify(piFailure(words)).kind).toBe(kind);
  });
});
