import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { ChatOpenAI } from "@langchain/openai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/core/validate.ts";
import { otel, traceRun } from "../../src/otel/otel.ts";
import { policy } from "../../src/policy/policy.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropic } from "../../src/providers/anthropic.ts";
import { callOptions, guardedFetch } from "../../src/providers/fetch.ts";
import { withBreakwater as google } from "../../src/providers/google.ts";
import { withBreakwater as langchain } from "../../src/providers/langchain.ts";
import { withBreakwater as openai } from "../../src/providers/openai.ts";
import { Run } from "../../src/run/run.ts";

const oa = () => new OpenAI({ apiKey: "sk-test" });
const an = () => new Anthropic({ apiKey: "sk-ant-test" });

/** What a call threw (synchronously). */
const thrown = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return undefined;
};

describe("every adapter's options are checked when it is made", () => {
  // After the Migrating table, the most natural mistake: an SDK's maxRetries as maxAttempts.
  it.each([
    ["openai.withBreakwater", () => openai(oa(), { maxAttempts: 2 } as never)],
    ["anthropic.withBreakwater", () => anthropic(an(), { maxAttempts: 2 } as never)],
    [
      "google.withBreakwater",
      () => google(new GoogleGenAI({ apiKey: "k" }), { maxAttempts: 2 } as never),
    ],
    ["guardedFetch", () => guardedFetch({ maxAttempts: 2 } as never)],
    ["breakwaterMiddleware", () => breakwaterMiddleware({ maxAttempts: 2 } as never)],
    [
      "langchain.withBreakwater",
      () => langchain(new ChatOpenAI({ apiKey: "k" }), { maxAttempts: 2 } as never),
    ],
  ])("%s: a policy option given to the adapter says where it goes", (owner, make) => {
    const e = thrown(make);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).toContain(
      `${owner}: option "maxAttempts" must be given to the policy`,
    );
    expect((e as Error).message).toContain("policy: { maxAttempts: ... }");
  });

  it.each([
    [
      "breakwaterMiddleware",
      () => breakwaterMiddleware({ maxAttempts: 2 } as never),
      "(breakwaterMiddleware({ policy: { maxAttempts: ... } }))",
    ],
    [
      "guardedFetch",
      () => guardedFetch({ maxAttempts: 2 } as never),
      "(guardedFetch({ policy: { maxAttempts: ... } }))",
    ],
    [
      "openai.withBreakwater",
      () => openai(oa(), { backoff: {} } as never),
      "(openai.withBreakwater(client, { policy: { backoff: ... } }))",
    ],
    [
      "callOptions",
      () => callOptions({ backoff: {} } as never),
      "the policy the client is wrapped with; per call, callOptions takes deadlineMs",
    ],
  ])("%s: where a policy option goes is said in the call's own shape", (_, make, shape) => {
    expect((thrown(make) as Error).message).toContain(shape);
  });

  it.each([
    ["openai.withBreakwater", () => openai(oa(), { contination: true } as never)],
    ["anthropic.withBreakwater", () => anthropic(an(), { timeoutMs: 5 } as never)],
    ["callOptions", () => callOptions({ runn: new Run() } as never)],
    ["otel", () => otel({ tracr: {} } as never)],
  ])("%s: an unknown option is refused, naming it and what is allowed", (owner, make) => {
    const e = thrown(make);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).toMatch(
      new RegExp(`^${owner}: option "\\w+" must be a known option`),
    );
  });

  it("traceRun: an unknown option is refused", async () => {
    await expect(traceRun(new Run(), async () => 1, { tracr: {} } as never)).rejects.toThrow(
      /^traceRun: option "tracr" must be a known option/,
    );
  });

  it("a bad value is refused, naming the option, the value and the rule", () => {
    expect(() => openai(oa(), { includeUsage: "yes" } as never)).toThrow(
      /openai.withBreakwater: option "includeUsage" must be true or false; got "yes"/,
    );
    expect(() => callOptions({ priority: Number.NaN })).toThrow(
      /"priority" must be a finite number/,
    );
  });

  it("per-call options that did not come through callOptions() are still checked, by the policy", async () => {
    // The fetch layer trusts what it checked itself; a hand-made entry is checked as any is.
    const fetch = guardedFetch({ fetch: async () => new Response("{}") });
    const init = {
      method: "POST",
      body: "{}",
      [Symbol.for("breakwater.call")]: { priority: "high" },
    };
    await expect(fetch("http://x.local/v1/chat/completions", init)).rejects.toThrow(
      /policy.execute: option "priority" must be a finite number; got "high"/,
    );
  });

  it("what a request's own values bring into the policy is checked there: a run that is none, a dialect's bad readings", async () => {
    const url = "http://x.local/v1/chat/completions";
    const init = { method: "POST", body: "{}" };
    const ok = async () => new Response("{}");
    for (const run of [{}, () => ({})])
      await expect(guardedFetch({ fetch: ok, run: run as never })(url, init)).rejects.toThrow(
        /policy.execute: option "run" must be a Run/,
      );
    const dialect = (over: object) => ({ isContent: () => true, ...over }) as never;
    await expect(
      guardedFetch({ fetch: ok, dialect: dialect({ provider: 42 }) })(url, init),
    ).rejects.toThrow(/option "provider" must be a non-empty string; got 42/);
    await expect(
      guardedFetch({ fetch: ok, dialect: dialect({ effect: () => "write" }) })(url, init),
    ).rejects.toThrow(/option "effect" must be one of/);
    // Well formed, the same request goes through.
    expect((await guardedFetch({ fetch: ok, dialect: dialect({}) })(url, init)).status).toBe(200);
  });

  it("a request the fetch layer does not guard (a Request object) still comes back as a promise", async () => {
    const fetch = guardedFetch({ fetch: (() => new Response("{}")) as never });
    const r = fetch(new Request("http://x.local/v1/models"));
    expect(r).toBeInstanceOf(Promise);
    expect((await r).status).toBe(200);
  });

  it("guardedFetch never throws where a fetch rejects: a fetch that throws, a header fetch refuses", async () => {
    const thrower = guardedFetch({
      fetch: () => {
        throw new RangeError("sync");
      },
      policy: policy({ maxAttempts: 1 }),
    });
    const call = thrower("http://x.local/v1/chat/completions", { method: "POST", body: "{}" });
    expect(call).toBeInstanceOf(Promise);
    await expect(call).rejects.toThrow();
    const plain = guardedFetch({
      fetch: async () => new Response("{}"),
      policy: policy({ maxAttempts: 1 }),
    });
    const bad = plain("http://x.local/v1", { method: "POST", body: "{}", headers: { "a b": "c" } });
    expect(bad).toBeInstanceOf(Promise);
    await expect(bad).rejects.toThrow();
  });

  it("each SDK's adapter refuses another SDK's client", () => {
    expect(() => anthropic(oa() as never)).toThrow(
      /anthropic.withBreakwater: option "client" must be an Anthropic client/,
    );
    expect(() => openai(an() as never)).toThrow(
      /openai.withBreakwater: option "client" must be an openai client/,
    );
  });
});
