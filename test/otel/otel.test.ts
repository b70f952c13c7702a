import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { generateText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/core/breaker.ts";
import { RetryBudget } from "../../src/core/budget.ts";
import { otel, traceRun } from "../../src/otel/otel.ts";
import { policy } from "../../src/policy/policy.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as langchainAdapter } from "../../src/providers/langchain.ts";
import { withBreakwater } from "../../src/providers/openai.ts";
import { Run } from "../../src/run/run.ts";
import { useFaultServer } from "../fault-fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "three little words" }];

const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(spans)],
});
const tracer = tracerProvider.getTracer("test");
const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
const meterProvider = new MeterProvider({ readers: [reader] });

/** Every data point of the metrics so far, by instrument name: [attributes, value]. */
async function points() {
  const { resourceMetrics } = await reader.collect();
  const out = new Map<string, { attributes: Record<string, unknown>; value: unknown }[]>();
  for (const scope of resourceMetrics.scopeMetrics)
    for (const metric of scope.metrics)
      out.set(metric.descriptor.name, [
        ...(out.get(metric.descriptor.name) ?? []),
        ...metric.dataPoints.map((p) => ({ attributes: p.attributes, value: p.value })),
      ]);
  return out;
}
const sum = (list: { value: unknown }[] | undefined) =>
  (list ?? []).reduce((s, p) => s + Number(p.value), 0);

const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => void context.setGlobalContextManager(contextManager.enable()));
afterAll(() => {
  context.disable();
});
beforeEach(() => spans.reset());

const client = (extra: Parameters<typeof policy>[0] = {}) => {
  const observe = otel({
    tracer,
    meter: meterProvider.getMeter(`m${Math.random()}`),
    provider: "openai",
  });
  const p = policy({
    model: "gpt-test",
    maxAttempts: 3,
    backoff: { baseMs: 10, capMs: 20 },
    observe,
    ...extra,
  });
  observe.gauges(p);
  return {
    p,
    ai: withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test-0000" }), {
      policy: p,
    }),
    observe,
  };
};

const byName = (name: string) => spans.getFinishedSpans().filter((s) => s.name.startsWith(name));
/** The attempt spans, in attempt order. */
const attemptSpans = () =>
  byName("breakwater.attempt").sort(
    (a, b) =>
      Number(a.attributes["breakwater.attempt"]) - Number(b.attributes["breakwater.attempt"]),
  );
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe("breakwater/otel with the real openai client on the fault server", () => {
  it("a wait at the rate limiter is an event on the call's span, with its length", async () => {
    fs.script({ rateLimit: { requestsPerMinute: 1, windowMs: 400 } });
    const { ai } = client();
    await ai.chat.completions.create({ model: "gpt-test", messages });
    spans.reset();
    await ai.chat.completions.create({ model: "gpt-test", messages });
    const [call] = byName("chat gpt-test");
    const waits = call!.events.map((e) => [
      e.name,
      e.attributes?.["breakwater.wait_why"],
      Number(e.attributes?.["breakwater.wait_ms"]) >= 250,
    ]);
    expect(waits).toEqual([["breakwater.wait", "rate-limit", true]]);
  });

  it("two 503s then a success: one call span (GenAI conventions), three attempt spans, two waits", async () => {
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    const { ai } = client();
    await ai.chat.completions.create({ model: "gpt-test", messages });
    const [call] = byName("chat gpt-test");
    expect(call).toBeDefined();
    expect(call!.kind).toBe(SpanKind.CLIENT);
    expect(call!.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-test",
      "gen_ai.usage.input_tokens": 3,
      "gen_ai.usage.output_tokens": 10,
      "breakwater.attempts": 3,
    });
    expect(
      call!.events.map((e) => [
        e.name,
        e.attributes?.["breakwater.wait_why"],
        e.attributes?.["error.type"],
      ]),
    ).toEqual([
      ["breakwater.wait", "backoff", "overloaded"],
      ["breakwater.wait", "backoff", "overloaded"],
    ]);
    const attempts = attemptSpans();
    expect(
      attempts.map((a) => [
        a.attributes["breakwater.attempt"],
        a.attributes["breakwater.outcome"],
        a.attributes["http.response.status_code"],
      ]),
    ).toEqual([
      [1, "failed", 503],
      [2, "failed", 503],
      [3, "ok", undefined],
    ]);
    expect(attempts.every((a) => parentOf(a) === call!.spanContext().spanId)).toBe(true);
    expect(attempts[0]!.status.code).toBe(SpanStatusCode.ERROR);
  });

  it("a hedge is an attempt span marked as one, with who won; counted as a hedge, not a retry", async () => {
    fs.script({ rules: [{ requests: [1, 1], headersDelayMs: 5_000 }] });
    const { ai } = client({ hedge: { afterMs: 100 } });
    const before = await points();
    await ai.chat.completions.create({ model: "gpt-test", messages });
    const after = await points();
    const attempts = attemptSpans();
    expect(
      attempts.map((a) => [
        a.attributes["breakwater.attempt"],
        a.attributes["breakwater.hedge"],
        a.attributes["breakwater.hedged"],
        a.status.code,
      ]),
    ).toEqual([
      [1, undefined, "lost", SpanStatusCode.UNSET],
      [2, true, "won", SpanStatusCode.UNSET],
    ]);
    expect(sum(after.get("breakwater.hedges")) - sum(before.get("breakwater.hedges"))).toBe(1);
    expect(sum(after.get("breakwater.retries")) - sum(before.get("breakwater.retries"))).toBe(0);
  });

  it("the metrics: attempts by outcome, retries, attempts per call, tokens", async () => {
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    const { ai } = client();
    const before = await points();
    await ai.chat.completions.create({ model: "gpt-test", messages });
    const after = await points();
    const delta = (name: string) => sum(after.get(name)) - sum(before.get(name));
    expect(delta("breakwater.attempts")).toBe(3);
    expect(delta("breakwater.retries")).toBe(2);
    const failed = (after.get("breakwater.attempts") ?? []).filter(
      (p) => p.attributes["breakwater.outcome"] === "failed",
    );
    expect(
      sum(failed) -
        sum(
          (before.get("breakwater.attempts") ?? []).filter(
            (p) => p.attributes["breakwater.outcome"] === "failed",
          ),
        ),
    ).toBe(2);
    const perCall = after.get("breakwater.call.attempts")!.at(-1)!.value as {
      count: number;
      sum: number;
    };
    expect(perCall.sum).toBeGreaterThanOrEqual(3);
    expect(after.get("gen_ai.client.token.usage")).toBeDefined();
  });

  it("a give-up: the reason, the failure, an error status whose message carries no key", async () => {
    fs.script({
      rules: [
        { status: 503, message: "upstream said: key sk-live-abcdefghijklmnopqrstu is wrong" },
      ],
    });
    const { ai } = client({ maxAttempts: 2 });
    await ai.chat.completions.create({ model: "gpt-test", messages }).catch(() => {});
    const [call] = byName("chat gpt-test");
    expect(call!.attributes).toMatchObject({
      "breakwater.give_up_reason": "attempts-exhausted",
      "error.type": "overloaded",
    });
    expect(call!.status.code).toBe(SpanStatusCode.ERROR);
    expect(
      JSON.stringify(spans.getFinishedSpans().map((s) => [s.attributes, s.status, s.events])),
    ).not.toContain("abcdefghijklmnopqrstu");
    expect(sum((await points()).get("breakwater.give_ups"))).toBeGreaterThanOrEqual(1);
  });

  it("parents: the call under the caller's active span; what the operation starts, under the attempt", async () => {
    const { p } = client();
    const request = tracer.startSpan("GET /ask");
    await context.with(trace.setSpan(context.active(), request), () =>
      p.execute(async () => {
        tracer.startSpan("POST /v1/chat/completions").end(); // as an instrumented HTTP client would
        return "ok";
      }),
    );
    request.end();
    const [call] = byName("chat gpt-test");
    const [attempt] = byName("breakwater.attempt");
    const [http] = byName("POST /v1/chat/completions");
    expect(parentOf(call!)).toBe(request.spanContext().spanId);
    expect(parentOf(attempt!)).toBe(call!.spanContext().spanId);
    expect(parentOf(http!)).toBe(attempt!.spanContext().spanId);
  });

  it("a stream's attempt carries its time to first token", async () => {
    const { ai } = client();
    for await (const _ of await ai.chat.completions.create({
      model: "gpt-test",
      messages,
      stream: true,
    }));
    const [attempt] = byName("breakwater.attempt");
    expect(attempt!.attributes["breakwater.time_to_first_token_ms"]).toBeGreaterThanOrEqual(0);
  });

  it("gauges: the breaker's state and the budget's tokens", async () => {
    const breaker = new CircuitBreaker({ consecutiveFailures: 1, openMs: 60_000 });
    client({ breaker, budget: new RetryBudget({ maxTokens: 7 }) });
    breaker.onFailure();
    const got = await points();
    expect(got.get("breakwater.breaker.state")?.at(-1)?.value).toBe(2);
    expect(got.get("breakwater.budget.tokens")?.at(-1)?.value).toBe(7);
  });

  it("traceRun: a span for the run, its calls under it, its totals at the end", async () => {
    const { p } = client();
    const run = new Run({ id: "ticket-1", deadlineMs: 60_000 });
    await traceRun(run, () => p.execute(async () => "ok", { run }), { tracer });
    const [span] = byName("breakwater.run");
    expect(span!.attributes).toMatchObject({
      "breakwater.run.id": "ticket-1",
      "breakwater.run.calls": 1,
      "breakwater.run.attempts": 1,
    });
    expect(parentOf(byName("chat gpt-test")[0]!)).toBe(span!.spanContext().spanId);
  });

  /** A wrapped openai client as the per-SDK quickstart writes it: no model on the policy,
   * no provider on the observer. */
  const plain = (policyModel?: string) => {
    const meter = meterProvider.getMeter(`m${Math.random()}`);
    const observe = otel({ tracer, meter });
    const p = policy({
      ...(policyModel && { model: policyModel }),
      backoff: { baseMs: 10, capMs: 20 },
      observe,
    });
    const ai = withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-x" }), {
      policy: p,
    });
    return { ai, meter };
  };

  it("the request's model names the span, the answer's is gen_ai.response.model, the adapter names the provider", async () => {
    fs.script({ rules: [{ servedBy: "gpt-4o-mini-2024-07-18" }] });
    const { ai } = plain();
    await ai.chat.completions.create({ model: "gpt-4o-mini", messages });
    const [call] = byName("chat gpt-4o-mini");
    expect(
      call,
      spans
        .getFinishedSpans()
        .map((x) => x.name)
        .join(", "),
    ).toBeDefined();
    expect(call!.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    });
    const [attempt] = byName("breakwater.attempt");
    expect(attempt!.attributes["gen_ai.response.model"]).toBe("gpt-4o-mini-2024-07-18");
    // A policy's model is only a default: the request says which model it asks for.
    spans.reset();
    await plain("gpt-4o").ai.chat.completions.create({ model: "gpt-4o-mini", messages });
    expect(byName("chat gpt-4o-mini")).toHaveLength(1);
    expect(spans.getFinishedSpans().some((x) => x.name === "chat gpt-4o")).toBe(false);
    // Embeddings are another operation; a stream names its answering model too.
    spans.reset();
    const { ai: ai2 } = plain();
    await ai2.embeddings.create({ model: "text-embedding-3-small", input: "hi" }).catch(() => {});
    const stream = await ai2.chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    for await (const _ of stream);
    expect(byName("embeddings text-embedding-3-small")).toHaveLength(1);
    expect(byName("chat gpt-4o-mini")[0]!.attributes["gen_ai.response.model"]).toBe(
      "gpt-4o-mini-2024-07-18",
    );
  });

  it("every point carries the conventions' required attributes; the operation's duration is recorded; a give-up's has error.type", async () => {
    const before = await points();
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    const { ai } = plain();
    await ai.chat.completions.create({ model: "gpt-4o-mini", messages });
    fs.script({ rules: [{ status: 400 }] });
    await ai.chat.completions.create({ model: "gpt-4o-mini", messages }).catch(() => {});
    const after = await points();
    const fresh = (name: string) =>
      (after.get(name) ?? []).filter(
        (p) =>
          !(before.get(name) ?? []).some(
            (q) => JSON.stringify(q.attributes) === JSON.stringify(p.attributes),
          ),
      );
    const usage = fresh("gen_ai.client.token.usage");
    expect(usage.map((p) => p.attributes["gen_ai.token.type"]).sort()).toEqual(["input", "output"]);
    // Billed tokens by type too: a sum over types would hide what a retry costs in prompts.
    const billed = fresh("breakwater.tokens.billed");
    expect(billed.map((p) => p.attributes["gen_ai.token.type"]).sort()).toEqual([
      "input",
      "output",
    ]);
    for (const p of usage)
      expect(p.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
      });
    const duration = fresh("gen_ai.client.operation.duration");
    expect(duration.length).toBe(2);
    for (const p of duration)
      expect(p.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
      });
    expect(duration.map((p) => p.attributes["error.type"] ?? "none").sort()).toEqual([
      "invalid_request",
      "none",
    ]);
  });

  it("a give-up: no usage where none is known (not 0), and the status names the SDK's class with the message masked", async () => {
    fs.script({
      rules: [
        { status: 503, message: "upstream said: key sk-live-abcdefghijklmnopqrstu is wrong" },
      ],
    });
    const { ai } = plain();
    const error = await ai.chat.completions
      .create({ model: "gpt-4o-mini", messages })
      .catch((e: unknown) => e);
    expect((error as Error).constructor.name).toBe("InternalServerError");
    await new Promise((r) => setImmediate(r)); // the span ends once the SDK's error is known
    const [call] = byName("chat gpt-4o-mini");
    expect(call!.attributes["gen_ai.usage.input_tokens"]).toBeUndefined();
    expect(call!.attributes["gen_ai.usage.output_tokens"]).toBeUndefined();
    expect(call!.status.message).toMatch(/^InternalServerError: 503 /);
    expect(call!.status.message).not.toContain("abcdefghijklmnopqrstu");
  });

  it("the AI SDK middleware and the LangChain adapter name the model, the provider and the answering model too", async () => {
    const observe = otel({ tracer, meter: meterProvider.getMeter(`m${Math.random()}`) });
    const p = policy({ observe });
    const model = wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-x" }).chat("gpt-4o-mini"),
      middleware: breakwaterMiddleware({ policy: p }),
    });
    fs.script({ rules: [{ servedBy: "gpt-4o-mini-2024-07-18" }] });
    await generateText({ model, prompt: "hi", maxRetries: 0 });
    const chat = langchainAdapter(
      new ChatOpenAI({
        model: "gpt-4.1-mini",
        apiKey: "sk-x",
        configuration: { baseURL: `${fs.server.url}/v1` },
      }),
      { policy: p },
    );
    await chat.invoke("hi");
    const names = spans
      .getFinishedSpans()
      .map((x) => [
        x.name,
        x.attributes["gen_ai.provider.name"],
        x.attributes["gen_ai.response.model"],
      ]);
    expect(names).toContainEqual(["chat gpt-4o-mini", "openai", "gpt-4o-mini-2024-07-18"]);
    expect(names).toContainEqual(["chat gpt-4.1-mini", "openai", "gpt-4o-mini-2024-07-18"]);
  });

  it("with no provider registered, a call is not watched at all", () => {
    const observe = otel(); // the API's global no-op tracer and meter
    expect(observe.call({ stream: false, model: "m", upstream: undefined })).toBeUndefined();
  });
});
