/**
 * Telemetry: one call that meets two 503s, traced with OpenTelemetry and printed two ways:
 * the SDK's ConsoleSpanExporter (what a collector would receive) and a small tree.
 *
 *   node otel.mts   (copied into a project with breakwater, openai, @opentelemetry/api,
 *   @opentelemetry/sdk-trace-base and @opentelemetry/context-async-hooks installed)
 */
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  ConsoleSpanExporter,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { policy } from "breakwater";
import { withBreakwater } from "breakwater/openai";
import { otel } from "breakwater/otel";
import { startFaultServer } from "breakwater/testing";
import OpenAI from "openai";

/** The spans as an indented tree with their timing and the attributes that tell the story. */
export function tree(spans: readonly ReadableSpan[]): string[] {
  const ms = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6;
  const t0 = Math.min(...spans.map((s) => ms(s.startTime)));
  const children = (id: string | undefined) =>
    spans
      .filter((s) => s.parentSpanContext?.spanId === id)
      .sort((a, b) => ms(a.startTime) - ms(b.startTime));
  const keep = [
    "breakwater.outcome",
    "http.response.status_code",
    "error.type",
    "breakwater.attempts",
    "gen_ai.usage.output_tokens",
  ];
  const lines: string[] = [];
  const walk = (s: ReadableSpan, depth: number) => {
    const attrs = keep
      .filter((k) => s.attributes[k] !== undefined)
      .map((k) => `${k}=${s.attributes[k]}`);
    const at = (ms(s.startTime) - t0).toFixed(0).padStart(5);
    lines.push(
      `${at} ms ${"  ".repeat(depth)}${s.name} (${ms(s.duration).toFixed(0)} ms) ${attrs.join(" ")}`,
    );
    for (const e of s.events)
      lines.push(
        `${(ms(e.time) - t0).toFixed(0).padStart(5)} ms ${"  ".repeat(depth + 1)}· ${e.name} ${e.attributes?.["breakwater.wait_why"]} ${e.attributes?.["breakwater.wait_ms"]} ms`,
      );
    for (const c of children(s.spanContext().spanId)) walk(c, depth + 1);
  };
  for (const root of spans.filter(
    (s) => !spans.some((p) => p.spanContext().spanId === s.parentSpanContext?.spanId),
  ))
    walk(root, 0);
  return lines.map((l) => l.replace(/ (\d+\.\d+) ms/g, (_, n) => ` ${Math.round(Number(n))} ms`));
}

export async function main(log: (line: string) => void = console.log, verbose = true) {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [
      new SimpleSpanProcessor(memory),
      ...(verbose ? [new SimpleSpanProcessor(new ConsoleSpanExporter())] : []),
    ],
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const server = await startFaultServer({ script: { rules: [{ requests: [1, 2], status: 503 }] } });
  try {
    const p = policy({
      model: "gpt-4o",
      backoff: { baseMs: 200, capMs: 400 },
      observe: otel({ provider: "openai" }),
    });
    const client = withBreakwater(
      new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "sk-example" }),
      { policy: p },
    );
    await client.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "Hello" }],
    });
    const lines = tree(memory.getFinishedSpans());
    for (const line of lines) log(line);
    return { spans: memory.getFinishedSpans(), lines };
  } finally {
    await server.close();
    await provider.shutdown();
    trace.disable();
    context.disable();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
