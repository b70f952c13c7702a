/**
 * pi-ai (`@mariozechner/pi-ai`): every API in its provider registry under one policy, so
 * `stream`, `complete`, `streamSimple`, `completeSimple` and what calls them (pi's agent
 * loop) are retried by breakwater alone, with the SDKs' own retries off.
 *
 * @example
 * ```ts
 * import * as pi from "@mariozechner/pi-ai";
 * import { policy } from "breakwater";
 * import { withBreakwater } from "breakwater/pi-ai";
 *
 * withBreakwater(pi, { policy: policy({ maxAttempts: 3 }) });
 * const model = { ...pi.getModel("openai", "gpt-4o-mini"), baseUrl: process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1" };
 * const context = { messages: [{ role: "user" as const, content: "Hello", timestamp: Date.now() }] };
 * const answer = await pi.complete(model, context, { apiKey: process.env.OPENAI_API_KEY ?? "sk-test" });
 * console.log(answer.stopReason, answer.content);
 * ```
 * @module breakwater/pi-ai
 */
import {
  type AttemptContext,
  ConfigError,
  failureOf,
  ledgerOf,
  type Policy,
  partialOf,
  reasonOf,
  type Usage,
} from "../index.ts";
import { tagError } from "../internal.ts";
import { piFailure } from "./pi-ai-errors.ts";
import { ignored } from "./scope.ts";
import {
  ADAPTER_SPEC,
  type AdapterOptions,
  adapterOptions,
  asPolicy,
  chatLabels,
  runFor,
} from "./shared.ts";

/** What `withBreakwater(pi)` takes: the policy and the run every model call draws on. */
export interface PiAiOptions extends AdapterOptions {}

type Obj = Record<string, any>;
type StreamFn = (model: Obj, context: unknown, options?: Obj) => PiStream;

/** pi-ai's event stream: what its providers return and its consumers read. */
interface PiStream extends AsyncIterable<Obj> {
  push(event: Obj): void;
  end(result?: Obj): void;
}

/** The part of pi-ai's module this adapter uses: its registry and its stream factory. */
export interface PiAiModule {
  /** The registered API providers (`openai-completions`, `anthropic-messages`, ...). */
  getApiProviders(): readonly { api: string; stream: unknown; streamSimple: unknown }[];
  /** Registers (replaces) the provider of an API. */
  registerApiProvider(provider: never, sourceId?: string): void;
  /** A new event stream of pi-ai's own kind, for what the wrapped provider returns. */
  createAssistantMessageEventStream(): unknown;
}

const OWNER = "withBreakwater (breakwater/pi-ai)";

/** Each module's providers as they were before breakwater wrapped them (wrapping again
 * wraps these, with the new policy). */
const originals = new WeakMap<object, Map<string, { stream: StreamFn; streamSimple: StreamFn }>>();

/**
 * Puts every API provider registered in `pi` (the built-ins, and yours registered before
 * this call) under the policy: each model call is one policy call, retried until its first
 * content and never after, with the SDK's own `maxRetries` at 0 (a caller's is ignored and
 * said once). A give-up ends the stream with pi-ai's `error` event; `reasonOf`, `ledgerOf`
 * and `partialOf` read breakwater's side of its message. Returns `pi`.
 */
export function withBreakwater<M extends PiAiModule>(pi: M, options: PiAiOptions = {}): M {
  adapterOptions(OWNER, ADAPTER_SPEC, options);
  const m = pi as unknown as Obj;
  for (const fn of ["getApiProviders", "registerApiProvider", "createAssistantMessageEventStream"])
    if (typeof m?.[fn] !== "function")
      throw new ConfigError(
        OWNER,
        "pi",
        pi,
        `pi-ai's module (import * as pi from "@mariozechner/pi-ai"): no ${fn}`,
      );
  const p = asPolicy(options.policy);
  const before = originals.get(pi) ?? new Map();
  originals.set(pi, before);
  for (const provider of pi.getApiProviders()) {
    const own = before.get(provider.api) ?? {
      stream: provider.stream as StreamFn,
      streamSimple: provider.streamSimple as StreamFn,
    };
    before.set(provider.api, own);
    const wrap = (inner: StreamFn) => guarded(p, pi, inner, options);
    pi.registerApiProvider(
      {
        api: provider.api,
        stream: wrap(own.stream),
        streamSimple: wrap(own.streamSimple),
      } as never,
      "breakwater",
    );
  }
  return pi;
}

/** One provider's stream function, under the policy. */
function guarded(p: Policy, pi: PiAiModule, inner: StreamFn, options: PiAiOptions): StreamFn {
  return (model, context, asked = {}) => {
    if (typeof asked.maxRetries === "number" && asked.maxRetries > 0)
      ignored(OWNER, "maxRetries", asked.maxRetries);
    const out = pi.createAssistantMessageEventStream() as PiStream;
    void pump(p, out, { inner, model, context, asked, run: runFor(options) });
    return out;
  };
}

interface PiCall {
  readonly inner: StreamFn;
  readonly model: Obj;
  readonly context: unknown;
  readonly asked: Obj;
  readonly run: ReturnType<typeof runFor>;
}

/** The policy's events into pi-ai's stream; a give-up as pi-ai's own `error` event. */
async function pump(p: Policy, out: PiStream, c: PiCall): Promise<void> {
  let shown: Obj | undefined; // the consumer's partial message, as the last event had it
  let lastOwn: Obj | undefined; // the last attempt's own error message
  const open = (ctx: AttemptContext) =>
    attemptEvents(c.inner(c.model, c.context, { ...c.asked, maxRetries: 0, signal: ctx.signal }), {
      signal: ctx.signal,
      failed: (message) => {
        lastOwn = message;
      },
    });
  try {
    const events = p.stream<Obj>(open, {
      ...labels(c.model),
      ...(c.asked.signal instanceof AbortSignal && { signal: c.asked.signal }),
      ...c.run,
      isContent,
      usage: piUsage,
    });
    for await (const event of events) {
      if (event.partial && typeof event.partial === "object") shown = event.partial;
      out.push(event);
    }
  } catch (error) {
    const message = gaveUp(c.model, shown ?? lastOwn, lastOwn, error);
    out.push({ type: "error", reason: message.stopReason, error: message });
  }
}

/** What a call of `model` is, as telemetry names it (the other adapters' words). */
const labels = (model: Obj) => chatLabels(model.id, model.provider);

/** One attempt's events: an `error` event is the attempt's failure, thrown for the policy. */
async function* attemptEvents(
  events: PiStream,
  a: { signal: AbortSignal; failed: (message: Obj) => void },
): AsyncGenerator<Obj> {
  for await (const event of events) {
    if (event?.type !== "error") {
      yield event;
      continue;
    }
    const message = (event.error ?? {}) as Obj;
    a.failed(message);
    if (a.signal.aborted) throw a.signal.reason;
    throw piFailure(String(message.errorMessage ?? "pi-ai: the model call failed"));
  }
}

/** A delta with something in it is content; `start`, a block's start, a tool call's
 * announcement (`toolcall_start`) are not yet. */
function isContent(event: Obj): boolean {
  const t = event?.type;
  const kind = t === "text_delta" || t === "thinking_delta" || t === "toolcall_delta";
  return kind && typeof event.delta === "string" && event.delta.length > 0;
}

/** Usage from the final message (`done`). */
function piUsage(event: Obj): Partial<Usage> | undefined {
  const u = event?.type === "done" ? event.message?.usage : undefined;
  if (!u || typeof u !== "object") return undefined;
  return { inputTokens: Number(u.input) || 0, outputTokens: Number(u.output) || 0 };
}

/**
 * The message a give-up ends with: what the consumer was shown (or the last attempt's own
 * message), `stopReason` "error" (or "aborted" when the caller aborted), pi's own words
 * and breakwater's reason, and the call's outcome for `reasonOf(message)`.
 */
function gaveUp(model: Obj, base: Obj | undefined, own: Obj | undefined, error: unknown): Obj {
  const reason = reasonOf(error);
  const words = own?.errorMessage ?? (error instanceof Error ? error.message : String(error));
  const message: Obj = {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    timestamp: Date.now(),
    ...base,
    stopReason: reason === "cancelled" ? "aborted" : "error",
    errorMessage: reason ? `${words} (breakwater: ${reason})` : words,
  };
  const ledger = ledgerOf(error);
  if (reason && ledger) tagError(message, reason, ledger, failureOf(error), partialOf(error));
  return message;
}
