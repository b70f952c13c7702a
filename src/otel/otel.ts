/**
 * OpenTelemetry: a span per logical call and per attempt (GenAI semantic conventions),
 * and the retry metrics. Needs `@opentelemetry/api` and a registered provider.
 *
 * @example
 * ```ts
 * import { trace } from "@opentelemetry/api";
 * import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
 * import { policy } from "breakwater";
 * import { otel } from "breakwater/otel";
 *
 * const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())] });
 * trace.setGlobalTracerProvider(provider);
 * const p = policy({ model: "gpt-4o-mini", observe: otel() });
 * await p.execute(async () => "an answer"); // prints the call's span and its attempt's
 * await provider.shutdown();
 * ```
 * @module breakwater/otel
 */
import {
  type Attributes,
  type Context,
  context,
  createNoopMeter,
  type Meter,
  metrics,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import {
  type AttemptRecord,
  type AttemptWatch,
  type CallEnd,
  type CallWatch,
  type Failure,
  type Observer,
  type Policy,
  type Run,
  redact,
  type WaitCause,
} from "../index.ts";
import { opt, parseOptions } from "../internal.ts";

/** What `otel()` takes. */
export interface OtelOptions {
  /** Where spans go. @default the global tracer provider's "breakwater" tracer */
  tracer?: Tracer;
  /** Where metrics go. @default the global meter provider's "breakwater" meter */
  meter?: Meter;
  /** `gen_ai.provider.name` (the GenAI semantic conventions): "openai", "anthropic",
   * "gcp.gemini", "aws.bedrock", ... @default unset */
  provider?: string;
  /** `gen_ai.operation.name`. @default "chat" */
  operation?: string;
}

const OTEL_SPEC = {
  tracer: opt.any<Tracer>((t) => typeof (t as Tracer | null)?.startSpan === "function", "a Tracer"),
  meter: opt.any<Meter>((m) => typeof (m as Meter | null)?.createCounter === "function", "a Meter"),
  provider: opt.str(),
  operation: opt.str(),
};

const BREAKER_STATE = { closed: 0, "half-open": 1, open: 2 } as const;

/** An error's class, as its caller would name it: its constructor's name (SDKs leave
 * `.name` as "Error"), else its `name`. */
function className(error: Error): string {
  const c = (error as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof c === "string" && c !== "" && c !== "Error" && c !== "Object" ? c : error.name;
}

/** An error's class and message, masked: what is exported never carries a key (rule 10). */
const safeMessage = (error: unknown): string =>
  redact(error instanceof Error ? `${className(error)}: ${error.message}` : String(error));

/** Attributes a failure adds, in the conventions' words where they have some. */
function failureAttributes(f: Failure | undefined): Attributes {
  if (f === undefined) return {};
  return {
    "error.type": f.kind,
    "breakwater.failure.kind": f.kind,
    ...(f.code !== undefined && { "breakwater.failure.code": f.code }),
    ...(f.status !== undefined && { "http.response.status_code": f.status }),
    ...(f.retryAfterMs !== undefined && { "breakwater.retry_after_ms": f.retryAfterMs }),
  };
}

/** The instruments, made once per observer. */
function instruments(meter: Meter) {
  return {
    attempts: meter.createCounter("breakwater.attempts", {
      description: "Attempts sent, by outcome and failure kind",
    }),
    retries: meter.createCounter("breakwater.retries", {
      description: "Attempts after the first, hedges not counted",
    }),
    hedges: meter.createCounter("breakwater.hedges", {
      description: "Hedges: attempts sent while an earlier one was still in flight",
    }),
    perCall: meter.createHistogram("breakwater.call.attempts", {
      description: "Attempts per logical call",
    }),
    giveUps: meter.createCounter("breakwater.give_ups", {
      description: "Calls ended without a value, by reason",
    }),
    wait: meter.createHistogram("breakwater.retry.wait", {
      description: "Waits before retries",
      unit: "ms",
    }),
    tokens: meter.createHistogram("gen_ai.client.token.usage", {
      description:
        "Tokens of a logical call's answer, by type (failed attempts' are breakwater.tokens.wasted)",
      unit: "{token}",
    }),
    duration: meter.createHistogram("gen_ai.client.operation.duration", {
      description: "How long a logical call took, its retries and waits included",
      unit: "s",
    }),
    wasted: meter.createCounter("breakwater.tokens.wasted", {
      description: "Tokens billed for failed attempts, by type (what retries cost)",
      unit: "{token}",
    }),
    billed: meter.createCounter("breakwater.tokens.billed", {
      description: "Tokens billed, retries included",
      unit: "{token}",
    }),
    cost: meter.createCounter("breakwater.cost", {
      description: "What calls cost, by the policy's prices",
    }),
  };
}

type Instruments = ReturnType<typeof instruments>;

/**
 * Telemetry for a policy, with the OpenTelemetry API (an optional peer): a span per
 * logical call (GenAI conventions: `gen_ai.operation.name`, `gen_ai.request.model`,
 * `gen_ai.usage.*`, `error.type`) with a child span per attempt and an event per wait, and
 * metrics (attempts, retries, attempts per call, give-ups, waits, tokens, cost, breaker
 * state, budget level). Pass it as `policy({ observe: otel() })`. With no provider
 * registered a call costs one no-op span start and is not watched further.
 */
export function otel(options: OtelOptions = {}): Observer & {
  /** Registers the gauges of a policy's breaker and budget (state, tokens left). */
  gauges(p: Policy): void;
} {
  parseOptions("otel", OTEL_SPEC, options);
  const tracer = options.tracer ?? trace.getTracer("breakwater");
  const meter = options.meter ?? metrics.getMeter("breakwater");
  const m = instruments(meter);
  const operation = options.operation ?? "chat";
  const provider = options.provider;
  // With no meter provider the meter is the API's no-op one: then an unsampled call needs
  // no watching at all.
  const measuring = meter.constructor !== createNoopMeter().constructor;
  return {
    call(info) {
      const parent = context.active();
      // The request's own names win over the observer's defaults.
      const op = info.operation ?? operation;
      const served = info.provider ?? provider;
      const name = info.model === undefined ? op : `${op} ${info.model}`;
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT }, parent);
      // Unsampled and unmeasured (no provider registered): nothing more to do, or to pay.
      if (!span.isRecording() && !measuring) return undefined;
      const attributes: Attributes = {
        "gen_ai.operation.name": op,
        ...(served !== undefined && { "gen_ai.provider.name": served }),
        ...(info.model !== undefined && { "gen_ai.request.model": info.model }),
        ...(info.upstream !== undefined && { "breakwater.upstream": info.upstream }),
        "breakwater.stream": info.stream,
      };
      span.setAttributes(attributes);
      return watchCall(tracer, m, span, parent, attributes);
    },
    gauges(p) {
      const { breaker, budget } = p.options;
      if (breaker !== undefined)
        meter
          .createObservableGauge("breakwater.breaker.state", {
            description: "0 closed, 1 half-open, 2 open",
          })
          .addCallback((r) => r.observe(BREAKER_STATE[breaker.state] ?? 0));
      const bucket = budget as unknown as { tokens?: unknown } | undefined;
      if (typeof bucket?.tokens === "number")
        meter
          .createObservableGauge("breakwater.budget.tokens", {
            description: "Retry tokens left in the budget",
          })
          .addCallback((r) => r.observe(Number(bucket.tokens)));
    },
  };
}

function watchCall(
  tracer: Tracer,
  m: Instruments,
  span: Span,
  parent: Context,
  base: Attributes,
): CallWatch {
  const callContext = trace.setSpan(parent, span);
  const started = performance.now();
  // What every point of this call carries (the conventions' Required and Conditionally
  // Required attributes of the GenAI client metrics).
  const metricAttrs: Attributes = {
    "gen_ai.operation.name": base["gen_ai.operation.name"],
    ...(base["gen_ai.request.model"] !== undefined && {
      "gen_ai.request.model": base["gen_ai.request.model"],
    }),
    ...(base["gen_ai.provider.name"] !== undefined && {
      "gen_ai.provider.name": base["gen_ai.provider.name"],
    }),
  };
  const waited = (ms: number, why: WaitCause, failure: Failure | undefined) => {
    span.addEvent("breakwater.wait", {
      "breakwater.wait_ms": ms,
      "breakwater.wait_why": why,
      ...failureAttributes(failure),
    });
    m.wait.record(ms, { ...metricAttrs, "breakwater.wait_why": why });
  };
  return {
    attempt: (n, hedge) => watchAttempt(tracer, m, callContext, metricAttrs, n, hedge === true),
    wait: waited,
    held: waited,
    end: (outcome) => endCall(m, span, metricAttrs, outcome, started),
  };
}

/** One attempt's span, a child of the call's, and its count. */
function watchAttempt(
  tracer: Tracer,
  m: Instruments,
  callContext: Context,
  metricAttrs: Attributes,
  n: number,
  hedge: boolean,
): AttemptWatch {
  const started = performance.now();
  const attributes: Attributes = {
    "breakwater.attempt": n,
    ...(hedge && { "breakwater.hedge": true }),
  };
  const attempt = tracer.startSpan(
    `breakwater.attempt ${n}`,
    { kind: SpanKind.INTERNAL, attributes },
    callContext,
  );
  const inAttempt = trace.setSpan(callContext, attempt);
  if (hedge) m.hedges.add(1, metricAttrs);
  else if (n > 1) m.retries.add(1, metricAttrs);
  return {
    run: (fn) => context.with(inAttempt, fn),
    firstContent() {
      attempt.setAttribute("breakwater.time_to_first_token_ms", performance.now() - started);
    },
    end(record: AttemptRecord) {
      attempt.setAttributes({
        "breakwater.outcome": record.outcome,
        "breakwater.wait_before_ms": record.waitMs,
        ...failureAttributes(record.failure),
        ...usageAttributes(record.usage),
        ...(record.responseModel !== undefined && {
          "gen_ai.response.model": record.responseModel,
        }),
        ...(record.hedged !== undefined && { "breakwater.hedged": record.hedged }),
      });
      // A hedge race's loser did nothing wrong: it was cut because the other answered.
      if (record.outcome === "failed" && record.hedged !== "lost")
        attempt.setStatus({ code: SpanStatusCode.ERROR });
      attempt.end();
      m.attempts.add(1, {
        ...metricAttrs,
        "breakwater.outcome": record.outcome,
        ...(record.failure && { "error.type": record.failure.kind }),
      });
    },
  };
}

/** Usage as the conventions count it, when it is known: absent (not 0) when the provider
 * never said. */
function usageAttributes(u: { inputTokens: number; outputTokens: number } | undefined): Attributes {
  return u === undefined
    ? {}
    : { "gen_ai.usage.input_tokens": u.inputTokens, "gen_ai.usage.output_tokens": u.outputTokens };
}

/** The call's span ends: what it cost, and why it gave up when it did. The span of a call
 * an adapter hands to its SDK ends once the SDK's own error is known, named by its class. */
function endCall(
  m: Instruments,
  span: Span,
  metricAttrs: Attributes,
  outcome: CallEnd,
  started: number,
): void {
  const { ledger } = outcome;
  const attempts = ledger.attempts.length;
  const answered = ledger.attempts.findLast((a) => a.outcome === "ok");
  const model = ledger.attempts.findLast((a) => a.responseModel !== undefined)?.responseModel;
  const wasted = ledger.attempts.some((a) => a.outcome === "failed" && a.usage !== undefined);
  span.setAttributes({
    "breakwater.attempts": attempts,
    ...usageAttributes(answered?.usage),
    ...(model !== undefined && { "gen_ai.response.model": model }),
    ...(wasted && {
      "breakwater.wasted.input_tokens": ledger.wasted.inputTokens,
      "breakwater.wasted.output_tokens": ledger.wasted.outputTokens,
    }),
  });
  const attrs =
    model === undefined ? metricAttrs : { ...metricAttrs, "gen_ai.response.model": model };
  m.perCall.record(attempts, metricAttrs);
  recordTokens(m, ledger, attrs, answered?.usage !== undefined);
  const seconds = (performance.now() - started) / 1000;
  if (outcome.ok) {
    m.duration.record(seconds, attrs);
    span.end();
    return;
  }
  span.setAttributes({
    "breakwater.give_up_reason": outcome.reason,
    ...failureAttributes(outcome.failure),
  });
  const errorType = outcome.failure?.kind ?? outcome.reason;
  m.duration.record(seconds, { ...attrs, "error.type": errorType });
  m.giveUps.add(1, { ...metricAttrs, "breakwater.give_up_reason": outcome.reason });
  const close = (error: unknown) => {
    // Redacted: what is exported never carries a key (rule 10).
    span.setStatus({ code: SpanStatusCode.ERROR, message: safeMessage(error) });
    span.end();
  };
  const seen = outcome.seenAs;
  if (seen === undefined) close(outcome.error);
  else
    seen.then(
      (e) => close(e ?? outcome.error),
      () => close(outcome.error),
    );
}

function recordTokens(
  m: Instruments,
  ledger: CallEnd["ledger"],
  attrs: Attributes,
  known: boolean,
): void {
  const { usage, wasted, billed } = ledger;
  // Per operation (semantic-conventions#4025 leaves it open): one point per logical call,
  // for the answer it got; what failed attempts burned is breakwater.tokens.wasted.
  if (known) {
    m.tokens.record(usage.inputTokens, { ...attrs, "gen_ai.token.type": "input" });
    m.tokens.record(usage.outputTokens, { ...attrs, "gen_ai.token.type": "output" });
  }
  if (wasted.inputTokens > 0)
    m.wasted.add(wasted.inputTokens, { ...attrs, "gen_ai.token.type": "input" });
  if (wasted.outputTokens > 0)
    m.wasted.add(wasted.outputTokens, { ...attrs, "gen_ai.token.type": "output" });
  if (billed.inputTokens > 0)
    m.billed.add(billed.inputTokens, { ...attrs, "gen_ai.token.type": "input" });
  if (billed.outputTokens > 0)
    m.billed.add(billed.outputTokens, { ...attrs, "gen_ai.token.type": "output" });
  const cost = ledger.cost?.billed;
  if (cost !== undefined && cost > 0) m.cost.add(cost, attrs);
}

/**
 * A span for a whole run around `fn` (its calls' spans nest under it): the run's id and
 * deadline, and at the end its totals (calls, attempts, retries, steps replayed, billed
 * tokens).
 */
export async function traceRun<T>(
  run: Run,
  fn: () => Promise<T>,
  options: { tracer?: Tracer } = {},
): Promise<T> {
  parseOptions("traceRun", { tracer: OTEL_SPEC.tracer }, options);
  const tracer = options.tracer ?? trace.getTracer("breakwater");
  const span = tracer.startSpan("breakwater.run", {
    attributes: { "breakwater.run.id": run.id, "breakwater.run.deadline_ms": run.remainingMs() },
  });
  try {
    return await context.with(trace.setSpan(context.active(), span), fn);
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: safeMessage(error) });
    throw error;
  } finally {
    const s = run.stats;
    span.setAttributes({
      "breakwater.run.calls": s.calls,
      "breakwater.run.attempts": s.attempts,
      "breakwater.run.retries": s.retries,
      "breakwater.run.steps_replayed": s.stepsReplayed,
      "breakwater.run.billed.input_tokens": run.billed.inputTokens,
      "breakwater.run.billed.output_tokens": run.billed.outputTokens,
    });
    span.end();
  }
}
