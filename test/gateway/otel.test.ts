import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Gateway, gateway } from "../../src/gateway/gateway.ts";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";

// `"otel": true`: each upstream's calls go through breakwater/otel on the process's global
// providers, inside the trace the client's traceparent names (this file's process has an SDK
// registered, as a gateway process started with one would).
const spans = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const contexts = new AsyncLocalStorageContextManager();
let fault: FaultServer;
let gw: Gateway;

beforeAll(async () => {
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(contexts.enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  fault = await startFaultServer();
  gw = await gateway({
    listen: { port: 0 },
    keys: ["k"],
    otel: true,
    upstreams: {
      up: {
        wire: "openai",
        baseUrl: `${fault.url}/v1`,
        apiKey: "u",
        policy: { backoff: { baseMs: 10, capMs: 20 } },
      },
    },
    models: { "*": "up" },
  });
});
afterAll(async () => {
  await gw?.close();
  await fault?.close();
  trace.disable();
  context.disable();
  propagation.disable();
});

describe("gateway: OpenTelemetry", () => {
  it("a call is one span of the client's trace (GenAI conventions), its attempts under it", async () => {
    fault.setScript({ rules: [{ requests: [1, 1], status: 503 }] });
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "k", maxRetries: 0 });
    await client.chat.completions.create(
      { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
      { headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } },
    );
    const done = spans.getFinishedSpans();
    const call = done.find((s) => s.name === "chat gpt-4o-mini");
    expect(call?.spanContext().traceId).toBe(traceId);
    expect(call?.parentSpanContext?.spanId).toBe("00f067aa0ba902b7");
    expect(call?.attributes).toMatchObject({
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "breakwater.attempts": 2,
    });
    const attempts = done.filter((s) => s.name.startsWith("breakwater.attempt"));
    expect(attempts.map((a) => a.attributes["breakwater.outcome"])).toEqual(["failed", "ok"]);
    expect(attempts.every((a) => a.parentSpanContext?.spanId === call?.spanContext().spanId)).toBe(
      true,
    );
  });

  it("is validated by name", async () => {
    const base = {
      keys: ["k"],
      upstreams: { u: { wire: "openai", baseUrl: "http://127.0.0.1:1/v1", apiKey: "k" } },
      models: { m: "u" },
    };
    await expect(gateway({ ...base, otel: "yes" })).rejects.toThrow(
      /"otel" must be true or false; got "yes"/,
    );
  });
});
