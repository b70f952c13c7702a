import { ChatAnthropic } from "@langchain/anthropic";
import { tool } from "@langchain/core/tools";
import { ChatGoogleGenerativeAI } from "@langchain/google-genai";
import { ChatOpenAI } from "@langchain/openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { audit } from "../../src/audit/audit.ts";
import { reasonOf } from "../../src/core/errors.ts";
import { ConfigError } from "../../src/core/validate.ts";
import { withBreakwater } from "../../src/providers/langchain.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();

const MODELS = {
  ChatOpenAI: () =>
    new ChatOpenAI({
      model: "gpt-test",
      apiKey: "sk-test-0000",
      configuration: { baseURL: `${fs.server.url}/v1` },
    }),
  ChatAnthropic: () =>
    new ChatAnthropic({
      model: "claude-test",
      apiKey: "sk-ant-test-0000",
      anthropicApiUrl: fs.server.url,
    }),
  ChatGoogleGenerativeAI: () =>
    new ChatGoogleGenerativeAI({
      model: "gemini-test",
      apiKey: "AIza-test-0000",
      baseUrl: fs.server.url,
    }),
};
const NAMES = Object.keys(MODELS) as (keyof typeof MODELS)[];

const wrapped = (name: keyof typeof MODELS) => {
  const t = testPolicy();
  return { ...t, model: withBreakwater(MODELS[name](), { policy: t.p }) };
};

const weather = tool(async ({ city }) => `sunny in ${city}`, {
  name: "weather",
  description: "The weather in a city",
  schema: z.object({ city: z.string() }),
});

describe("breakwater/langchain: real LangChain chat models on the fault server", () => {
  it.each(NAMES)(
    "%s: LangChain's own 6 retries are off; 503 twice then 200 is 3 requests",
    async (name) => {
      fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
      const { model, ledgers } = wrapped(name);
      const m = await model.invoke("three little words");
      expect(m.text).toBe(TEXT);
      expect(fs.requests()).toBe(3);
      expect(ledgers[0]!.attempts.map((a) => a.outcome)).toEqual(["failed", "failed", "ok"]);
    },
  );

  it.each(NAMES)(
    "%s: always 503 is exactly maxAttempts requests and LangChain's error",
    async (name) => {
      fs.script({ rules: [{ status: 503 }] });
      const { model, gaveUp } = wrapped(name);
      const error = await model.invoke("hi").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(fs.requests()).toBe(3);
      expect(gaveUp.map((e) => e.reason)).toEqual(["attempts-exhausted"]);
    },
  );

  it.each(NAMES)(
    "%s: the unwrapped model sends 7 requests for the same outage (LangChain's default)",
    async (name) => {
      fs.script({ rules: [{ status: 400 }, { status: 503 }] });
      // A 400 first: LangChain stops on it, so this measures one request without waiting out
      // six backoffs; the default itself is read from the caller.
      await MODELS[name]()
        .invoke("hi")
        .catch(() => {});
      expect(fs.requests()).toBe(1);
      expect(
        (MODELS[name]() as unknown as { caller: { maxRetries: number } }).caller.maxRetries,
      ).toBe(6);
    },
  );

  it.each(NAMES)(
    "%s: stream: a failure before content is retried, the consumer sees one answer",
    async (name) => {
      // @google/generative-ai reads an in-band error chunk as a chunk with no candidates (the
      // stream ends empty, below) and a cut stream as an error without its cause: for it, the
      // failure before content is a 503.
      const google = name === "ChatGoogleGenerativeAI";
      fs.script({
        rules: [
          google
            ? { requests: [1, 1], status: 503 }
            : { requests: [1, 1], stream: { after: 0, action: "error", error: "server_error" } },
        ],
      });
      const { model } = wrapped(name);
      let text = "";
      for await (const chunk of await model.stream("three little words")) text += chunk.text;
      expect(text).toBe(TEXT);
      expect(fs.requests()).toBe(2);
    },
  );

  it.each(NAMES)("%s: batch and bindTools go through the same policy", async (name) => {
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    const { model, ledgers } = wrapped(name);
    const answers: { text: string }[] = await (model as ChatOpenAI).batch(["one", "two"]);
    expect(answers.map((a) => a.text)).toEqual([TEXT, TEXT]);
    const withTools = model.bindTools!([weather]);
    expect((await withTools.invoke("weather in Paris?")).text).toBe(TEXT);
    expect(fs.requests()).toBe(4);
    expect(ledgers).toHaveLength(3);
  });

  it.each(["ChatOpenAI", "ChatAnthropic"] as const)(
    "%s: the limits its answers' headers tell are learned (the SDK client it builds hears them), the user's fetch kept",
    async (name) => {
      fs.script({ rules: [], rateLimit: { requestsPerMinute: 1 } });
      let seen = 0;
      const own: typeof fetch = (input, init) => {
        seen++;
        return fetch(input, init);
      };
      const base =
        name === "ChatOpenAI"
          ? new ChatOpenAI({
              model: "gpt-test",
              apiKey: "sk-test-0000",
              configuration: { baseURL: `${fs.server.url}/v1`, fetch: own },
            })
          : new ChatAnthropic({
              model: "claude-test",
              apiKey: "sk-ant-test-0000",
              anthropicApiUrl: fs.server.url,
              clientOptions: { fetch: own },
            });
      const model = withBreakwater(base as ChatOpenAI, {
        policy: testPolicy({ deadlineMs: 2_000 }).p,
      });
      expect((await model.invoke("hi")).text).toBe(TEXT);
      const e = await model.invoke("hi").catch((x: unknown) => x);
      expect([reasonOf(e), fs.requests(), seen]).toEqual(["rate-limit-wait", 1, 1]);
      const config = base as unknown as { clientConfig?: object; clientOptions?: object };
      expect(config.clientConfig ?? config.clientOptions).toMatchObject({ fetch: own }); // left as it was
    },
  );

  it.each(["ChatOpenAI", "ChatAnthropic"] as const)(
    "%s used before it was wrapped (its SDK client built): the wrapped one's answers are heard all the same",
    async (name) => {
      fs.script({ rules: [], rateLimit: { requestsPerMinute: 2 } });
      const base = MODELS[name]();
      expect((await base.invoke("hi")).text).toBe(TEXT); // builds its client, unwrapped
      const model = withBreakwater(base, { policy: testPolicy({ deadlineMs: 2_000 }).p });
      expect((await model.invoke("hi")).text).toBe(TEXT);
      const e = await model.invoke("hi").catch((x: unknown) => x);
      expect([reasonOf(e), fs.requests()]).toEqual(["rate-limit-wait", 2]);
    },
  );

  it("ChatGoogleGenerativeAI ends a stream whose first chunk is an error empty, wrapped or not", async () => {
    for (const model of [
      MODELS.ChatGoogleGenerativeAI(),
      wrapped("ChatGoogleGenerativeAI").model,
    ]) {
      fs.script({
        rules: [{ requests: [1, 1], stream: { after: 0, action: "error", error: "server_error" } }],
      });
      fs.server.resetStats();
      let text = "";
      for await (const chunk of await model.stream("hi")) text += chunk.text;
      expect(text).toBe(""); // no error reaches LangChain's caller: nothing to classify
      expect(fs.requests()).toBe(1);
    }
  });

  it("the model handed in is left as it was", async () => {
    const model = MODELS.ChatOpenAI();
    withBreakwater(model, { policy: testPolicy().p });
    expect((model as unknown as { caller: { maxRetries: number } }).caller.maxRetries).toBe(6);
    expect(Object.hasOwn(model, "_generate")).toBe(false);
  });

  it("refuses what is not a chat model, by name", () => {
    for (const bad of [null, {}, { invoke: () => {} }])
      expect(() => withBreakwater(bad as never)).toThrow(ConfigError);
  });

  it("audit counts LangChain's 6 retries around an SDK's own", () => {
    const report = audit([], {
      langchain: MODELS.ChatOpenAI() as never,
      openai: { maxRetries: 2 },
    });
    expect(report.layers.map((l) => [l.name, l.attempts])).toEqual([
      ["langchain", 7],
      ["openai", 3],
    ]);
    expect(report.worstCaseRequests).toBe(21);
    expect(
      report.warnings.some((w) => w.includes("LangChain retries on its own (maxRetries 6)")),
    ).toBe(true);
    const off = audit([], {
      langchain: withBreakwater(MODELS.ChatOpenAI(), { policy: testPolicy().p }) as never,
    });
    // The wrapped model is breakwater's layer: its policy's 3 attempts, the model's own off.
    expect(off.layers).toEqual([
      { name: "breakwater (langchain.withBreakwater)", attempts: 3, worstWaitMs: 0 },
    ]);
  });
});
