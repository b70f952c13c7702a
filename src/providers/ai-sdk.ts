/**
 * The Vercel AI SDK middleware: any language model, wrapped, with the SDK's own retries off.
 *
 * @example
 * ```ts
 * import { createOpenAI } from "@ai-sdk/openai";
 * import { generateText, wrapLanguageModel } from "ai";
 * import { breakwaterMiddleware } from "breakwater/ai-sdk";
 *
 * const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL });
 * const model = wrapLanguageModel({ model: openai.chat("gpt-4o-mini"), middleware: breakwaterMiddleware() });
 * const { text } = await generateText({ model, prompt: "Hello", maxRetries: 0 });
 * console.log(text);
 * ```
 * @module breakwater/ai-sdk
 */
import type { LanguageModelV4Middleware, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import {
  type AttemptContext,
  ConfigError,
  type Effect,
  type OutputCheck,
  type PartialResult,
  type Policy,
  RequestCheckError,
  type Run,
  type Usage,
} from "../index.ts";
import { opt } from "../internal.ts";
import { finalGiveUp, priorGiveUp } from "./ai-sdk-final.ts";
import {
  decode,
  encode,
  type RecordedStream,
  recording,
  replayed,
  slotFor,
} from "./ai-sdk-journal.ts";
import { aiSdkAnswer } from "./answers.ts";
import { type CheckDialect, type Checks, replyChecks, streamChecks } from "./checks.ts";
import { prefillOf } from "./continuation.ts";
import { type Lead, stripLead } from "./dialect.ts";
import { inAttempt } from "./scope.ts";
import {
  ADAPTER_SPEC,
  type AdapterOptions,
  adapterOptions,
  asPolicy,
  chatLabels,
  hear,
  runFor,
} from "./shared.ts";

/** What `breakwaterMiddleware` takes: the policy and run, output checks, the context window, continuation. */
export interface AiSdkMiddlewareOptions extends AdapterOptions {
  /** A truncated answer (finish reason "length") is an OutputError, never retried ("error"),
   * or handed over as it came ("allow"). @default "error" */
  truncation?: "error" | "allow";
  /** Checks every answer's text before it counts (a Standard Schema, read as JSON; or a
   * function): a failed check is retried within the call's attempts. */
  validate?: OutputCheck;
  /** The schema reads the JSON inside a markdown code fence that is the whole answer;
   * `false`: a fenced answer fails as `parse`. @default true */
  fencedJson?: boolean;
  /** The model's context window in tokens: a call whose `maxOutputTokens` leaves no room
   * for its prompt fails before it is sent. */
  contextTokens?: number;
  /** Opt-in: a stream that breaks after content goes on from the text so far, as one answer
   * (Anthropic models, which take a last assistant message as a prefill; elsewhere the break
   * ends the stream as usual). Never after a tool call, never past the deadline, the
   * attempts or the admission. @default false */
  continuation?: boolean;
}

type Obj = Record<string, any>;

/** Usage from a generate result or a `finish` part (`{ inputTokens: { total }, ... }`). */
export function aiSdkUsage(x: unknown): Partial<Usage> | undefined {
  const o = x as Obj | null;
  const u = (o?.type === "finish" || o?.usage ? o?.usage : undefined) as Obj | undefined;
  if (!u) return undefined;
  const input = typeof u.inputTokens === "object" ? u.inputTokens?.total : u.inputTokens;
  const output = typeof u.outputTokens === "object" ? u.outputTokens?.total : u.outputTokens;
  return {
    ...(typeof input === "number" && { inputTokens: input }),
    ...(typeof output === "number" && { outputTokens: output }),
  };
}

/** Parts that carry no answer yet: held back until content arrives. */
const NOT_CONTENT = new Set([
  "stream-start",
  "response-metadata",
  "text-start",
  "text-end", // an empty block's end (one after its deltas comes after content anyway)
  "reasoning-start",
  "reasoning-end",
  "tool-input-start",
  "raw",
  "custom", // provider metadata (@ai-sdk/anthropic's message_start)
  "ping",
  "finish",
  "error",
]);
/** An AI SDK stream part is content unless it is a preamble (a tool call's announcement
 * included), an empty delta, or a raw, finish or error part. */
export const isAiSdkContent = (part: unknown): boolean => {
  const p = part as Obj | null;
  return !NOT_CONTENT.has(String(p?.type)) && p?.delta !== "";
};

/**
 * The provider's error inside a 200 stream: an `error` part; a `raw` chunk that carries an
 * `error` the provider's parser dropped (OpenRouter sends `{ choices, error }` mid-stream,
 * which @ai-sdk/openai reads as a plain chunk); or a finish whose raw reason is "error".
 * Reads both the model's parts (`finishReason.raw`) and `fullStream`'s (`rawFinishReason`).
 */
export function aiSdkInBand(part: unknown): unknown {
  const p = part as Obj | null;
  if (p?.type === "error") return p.error ?? new Error("stream error");
  if (p?.type === "raw") return rawError(p.rawValue);
  const finished = p?.type === "finish" || p?.type === "finish-step";
  if (finished && (p.finishReason?.raw === "error" || p.rawFinishReason === "error"))
    return {
      type: "server_error",
      message: 'the provider ended the stream with finish_reason "error"',
    };
  return undefined;
}

const isObject = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** An error in a raw chunk: `{ error }` (OpenAI-compatible, Anthropic, Gemini), or a Bedrock
 * event-stream exception the provider does not parse (`{ modelTimeoutException: {...} }`,
 * which @ai-sdk/amazon-bedrock turns into an empty answer). */
function rawError(raw: unknown): unknown {
  if (!isObject(raw)) return undefined;
  if (isObject(raw.error)) return raw.error;
  for (const key of Object.keys(raw))
    if (key.endsWith("Exception") && isObject(raw[key])) return { ...raw[key], type: key };
  return undefined;
}

/** The parts as they come; a `response-metadata` part names the model that answered. */
async function* iterate<T>(stream: ReadableStream<T>, ctx: AttemptContext): AsyncGenerator<T> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      const part = value as { type?: unknown; modelId?: unknown };
      if (part?.type === "response-metadata" && typeof part.modelId === "string")
        ctx.answeredBy(part.modelId);
      yield value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** The middleware's own options, on top of every adapter's. */
const SPEC = {
  ...ADAPTER_SPEC,
  truncation: opt.oneOf(["error", "allow"] as const, "error"),
  fencedJson: opt.bool(true),
  validate: opt.any<OutputCheck>(
    (v) => typeof v === "function" || (v !== null && typeof v === "object"),
    "a Standard Schema or a function",
  ),
  contextTokens: opt.int({ min: 1, default: Number.NaN }),
  continuation: opt.bool(false),
};

/**
 * A language-model middleware for the AI SDK's `wrapLanguageModel` (middleware
 * specification v4): `doGenerate` through `policy.execute`, `doStream` through
 * `policy.stream` with the first-delta rule (an `error` part before content is retried;
 * a give-up, after content or not, errors the stream with the partial answer's error). It
 * classifies APICallError by breakwater's rules, not by `isRetryable` (a quota 429 is not
 * retried). Its give-ups say `isRetryable: false`, so the AI SDK's own `maxRetries` (and
 * Mastra's, which reads the same flag) retry none of them.
 */
export function breakwaterMiddleware(
  options: AiSdkMiddlewareOptions = {},
): LanguageModelV4Middleware {
  const o = adapterOptions("breakwaterMiddleware", SPEC, options);
  const p = asPolicy(options.policy);
  const checks = {
    truncation: o.truncation,
    validate: o.validate,
    fencedJson: o.fencedJson,
  } as const;
  const contextTokens = Number.isNaN(o.contextTokens) ? undefined : o.contextTokens;
  return {
    specificationVersion: "v4",
    wrapGenerate: async ({ params, model }) => {
      const early = refusedEarly(params, model, contextTokens, p);
      if (early) throw early.error; // nothing sent, nothing spent
      const run = runFor(options);
      // With a journaled run, a call made before at this place is answered from the journal.
      const pending = slotFor(run.run, "generate", model, params);
      const slot = pending && (await pending); // no wait without a journal
      if (slot?.replayed) return decode<Awaited<ReturnType<typeof model.doGenerate>>>(slot.answer);
      const r = await generated(p, { params, model, checks, continuing: false, run });
      if (slot?.replayed === false) await slot.record(encode(r));
      return r;
    },
    wrapStream: async ({ params, model }) => {
      const early = refusedEarly(params, model, contextTokens, p);
      if (early) throw early.error;
      const continuing = o.continuation && model.provider.includes("anthropic");
      const run = runFor(options);
      const pending = slotFor(run.run, "stream", model, params);
      const slot = pending && (await pending); // no wait without a journal
      if (slot?.replayed) {
        const { meta, parts } = decode<RecordedStream>(slot.answer);
        return { ...meta, stream: replayed(parts as Part[]) };
      }
      const { stream, ...meta } = await guardedParts(p, { params, model, checks, continuing, run });
      if (slot?.replayed !== false) return { ...meta, stream };
      const kept = (parts: Part[]) => slot.record(encode({ meta, parts }));
      return { ...meta, stream: recording(stream, kept) };
    },
  };
}

type Params = Parameters<NonNullable<LanguageModelV4Middleware["wrapStream"]>>[0]["params"];
type Model = Parameters<NonNullable<LanguageModelV4Middleware["wrapStream"]>>[0]["model"];

/** What is refused before anything is sent: a transcript or an output allowance that
 * cannot work, or a call breakwater already gave up on, asked again by a layer above. */
function refusedEarly(
  params: Params,
  model: Model,
  contextTokens: number | undefined,
  policy: Policy,
): { error: unknown } | undefined {
  const refused = checkPrompt(params, contextTokens);
  if (refused !== undefined) return { error: refused };
  return priorGiveUp({ prompt: params.prompt, model, policy });
}

/** A provider call whose answer's headers, or its APICallError's, tell the policy's limiter
 * where the limits stand: the provider's fetch is its own, so the middleware reads them. */
async function heard<R extends { response?: { headers?: unknown } }>(
  p: Policy,
  send: () => PromiseLike<R>,
): Promise<R> {
  const limiter = p.options.limiter;
  try {
    const r = await send();
    hear(limiter, r.response?.headers);
    return r;
  } catch (e) {
    if (e !== null && typeof e === "object")
      hear(limiter, (e as { responseHeaders?: unknown }).responseHeaders);
    throw e;
  }
}

/** `doGenerate` under the policy: one provider call per attempt; a give-up is final. */
async function generated(p: Policy, c: ModelCall) {
  const { params, model } = c;
  const answered = async (ctx: AttemptContext) => {
    const r = await heard(p, () =>
      inAttempt(ctx.attempt, () => model.doGenerate({ ...params, abortSignal: ctx.signal })),
    );
    if (typeof r.response?.modelId === "string") ctx.answeredBy(r.response.modelId);
    return r;
  };
  return p
    .execute(answered, {
      ...labels(model),
      effect: aiSdkEffect(params),
      ...(params.abortSignal && { signal: params.abortSignal }),
      ...c.run,
      usage: aiSdkUsage,
      ...replyChecks(AI_SDK_CHECKS, c.checks, (r: unknown) => r),
    })
    .catch((e: unknown) => {
      throw finalGiveUp({ prompt: params.prompt, model, policy: p }, e);
    });
}
type Part = LanguageModelV4StreamPart;

/**
 * What sending a call again does (rule 20): the caller's word
 * (`providerOptions: { breakwater: { effect: "idempotent" } }`), else unsafe when it names
 * a stored OpenAI conversation or starts a background response; else idempotent.
 */
export function aiSdkEffect(params: { providerOptions?: unknown }): Effect {
  const o = params.providerOptions as
    | Record<string, Record<string, unknown> | undefined>
    | undefined;
  const said = o?.breakwater?.effect;
  if (said === "read" || said === "idempotent" || said === "unsafe") return said;
  if (said !== undefined)
    throw new ConfigError(
      "breakwaterMiddleware",
      "providerOptions.breakwater.effect",
      said,
      '"read", "idempotent" or "unsafe"',
    );
  for (const key of ["openai", "azure"]) {
    const openai = o?.[key];
    if (openai && ((openai.conversation ?? null) !== null || openai.background === true))
      return "unsafe";
  }
  return "idempotent";
}

/** What a call of `model` is, as telemetry names it. */
const labels = (model: Model) => chatLabels(model.modelId, model.provider);

/** One streamed call of the middleware: what it streams, how it is checked, whether a
 * break may continue (Anthropic models take a last assistant message as a prefill). */
interface ModelCall {
  readonly params: Params;
  readonly model: Model;
  readonly checks: Checks;
  readonly continuing: boolean;
  readonly run: { run?: Run };
}

/** The model's parts under the policy: retried before content; parts reach the SDK only
 * once content flows (the retries happen before this resolves). */
async function guardedParts(p: Policy, c: ModelCall) {
  const { params, model } = c;
  let meta: Omit<Awaited<ReturnType<typeof model.doStream>>, "stream"> = {};
  // Raw chunks are how an error the provider's parser dropped is seen (aiSdkInBand); they
  // reach the caller only if the caller asked for them.
  const open = (prompt: Params["prompt"], first: boolean) => async (ctx: AttemptContext) => {
    const { stream, ...rest } = await heard(p, () =>
      inAttempt(ctx.attempt, () =>
        model.doStream({ ...params, prompt, includeRawChunks: true, abortSignal: ctx.signal }),
      ),
    );
    if (first) meta = rest;
    return iterate(stream, ctx);
  };
  const guarded = p.stream<Part>(open(params.prompt, true), {
    ...labels(model),
    effect: aiSdkEffect(params),
    ...(params.abortSignal && { signal: params.abortSignal }),
    ...c.run,
    inspect: aiSdkInBand,
    isContent: isAiSdkContent,
    answer: aiSdkAnswer,
    usage: aiSdkUsage,
    ...streamChecks(AI_SDK_CHECKS, c.checks, (parts: readonly Part[]) => parts),
    ...(c.continuing && {
      continueFrom: (partial: PartialResult<Part>) => {
        const go = prefillOf(partial.answer);
        if (go === undefined) return undefined;
        const prefill = {
          role: "assistant" as const,
          content: [{ type: "text" as const, text: go.prefill }],
        };
        const next = open([...params.prompt, prefill], false);
        const shape = goOn(go.lead, openTextId(partial.chunks));
        return async (ctx: AttemptContext) => shapeParts(await next(ctx), shape);
      },
    }),
  });
  const final = (e: unknown) => finalGiveUp({ prompt: params.prompt, model, policy: p }, e);
  const first = await guarded.next().catch((e: unknown) => {
    throw final(e);
  });
  return { ...meta, stream: partsStream(guarded, first, params.includeRawChunks === true, final) };
}

/** The parts for the SDK: raw chunks only when asked for; a give-up errors the stream. */
function partsStream(
  guarded: AsyncIterator<Part> & { return(): Promise<unknown> },
  first: IteratorResult<Part>,
  raw: boolean,
  final: (error: unknown) => unknown,
): ReadableStream<Part> {
  let pending: IteratorResult<Part> | undefined = first;
  return new ReadableStream<Part>({
    async pull(controller) {
      try {
        for (;;) {
          const r = pending ?? (await guarded.next());
          pending = undefined;
          if (r.done) return controller.close();
          if (r.value.type === "raw" && !raw) continue;
          return controller.enqueue(r.value);
        }
      } catch (error) {
        // The stream errors, not an `error` part: streamText's streamRetries re-calls the
        // model on any error part, which would replay what the user saw and multiply the
        // policy's attempts; a stream that errors it passes on, retried by no one.
        controller.error(final(error));
      }
    },
    async cancel() {
      await guarded.return();
    },
  });
}

/** The text block the consumer has open: the last `text-start` it read. */
function openTextId(parts: readonly Part[]): string | undefined {
  for (let i = parts.length - 1; i >= 0; i--) {
    const part = parts[i]!;
    if (part.type === "text-start") return part.id;
  }
  return undefined;
}

async function* shapeParts(
  parts: AsyncIterable<Part>,
  shape: (part: Part) => Part | undefined,
): AsyncGenerator<Part> {
  for await (const part of parts) {
    const out = shape(part);
    if (out !== undefined) yield out;
  }
}

/** A continuation's parts as the consumer should read them, going on with the first answer:
 * its preamble dropped, its text in the block already open, the lead whitespace taken off. */
function goOn(lead: Lead, textId: string | undefined): (part: Part) => Part | undefined {
  return (part) => {
    if (part.type === "stream-start" || part.type === "response-metadata") return undefined;
    if (part.type === "text-start" && textId !== undefined) return undefined;
    if ((part.type === "text-delta" || part.type === "text-end") && textId !== undefined) {
      if (part.type === "text-end") return { ...part, id: textId };
      return {
        ...part,
        id: textId,
        delta: lead.strip > 0 ? stripLead(part.delta, lead) : part.delta,
      };
    }
    return part;
  };
}

/** How checks read the AI SDK: a generate result's text and unified finish reason; a
 * stream's parts. */
const AI_SDK_CHECKS: CheckDialect = {
  reply: (json) => {
    const r = json as Obj | null;
    if (!r || !Array.isArray(r.content)) return undefined;
    const text = r.content.map((c: Obj) => (c?.type === "text" ? c.text : "")).join("");
    return { text, finish: r.finishReason?.unified ?? r.finishReason };
  },
  answer: aiSdkAnswer,
};

/** The prompt's transcript (every tool result answers a call just before it, every call is
 * answered), and the output allowance against the context window. */
function checkPrompt(
  params: { prompt: unknown; maxOutputTokens?: number },
  contextTokens: number | undefined,
) {
  const prompt: Obj[] = Array.isArray(params.prompt) ? params.prompt : [];
  let open = new Set<string>();
  for (const [i, m] of prompt.entries()) {
    const parts: Obj[] = Array.isArray(m?.content) ? m.content : [];
    if (m?.role === "tool") {
      for (const part of parts.filter((x) => x?.type === "tool-result"))
        if (!open.delete(part.toolCallId))
          return new RequestCheckError(
            "transcript",
            `prompt[${i}] has a tool result for ${JSON.stringify(part.toolCallId)}, which no call just before made`,
          );
      continue;
    }
    if (open.size > 0)
      return new RequestCheckError(
        "transcript",
        `prompt[${i}] comes before tool call ${JSON.stringify([...open][0])} was answered`,
      );
    open = new Set(
      m?.role === "assistant"
        ? parts.filter((x) => x?.type === "tool-call").map((x) => x.toolCallId)
        : [],
    );
  }
  const max = params.maxOutputTokens;
  if (contextTokens === undefined || max === undefined) return undefined;
  const floor = Math.floor(Buffer.byteLength(JSON.stringify(params.prompt)) / 8);
  return max + floor > contextTokens
    ? new RequestCheckError(
        "max-output",
        `the call allows ${max} output tokens, and its prompt is at least ${floor}: more than the model's ${contextTokens}-token context window`,
      )
    : undefined;
}
