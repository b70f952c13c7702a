import type OpenAI from "openai";
import type { GuardedStream, Usage } from "../index.ts";
import { type AdapterOptions, asPolicy, overlay, runFor } from "./shared.ts";

export interface OpenAIAdapterOptions extends AdapterOptions {
  /** Ask for the usage chunk on streams (`stream_options.include_usage`). Default true. */
  includeUsage?: boolean;
}

type Create = (params: any, options?: any) => any;
type Obj = Record<string, any>;

/** Usage from a chat completion or its final stream chunk. */
export function openaiUsage(x: unknown): Partial<Usage> | undefined {
  const u = (x as Obj | null)?.usage as Obj | undefined;
  if (!u) return undefined;
  // chat: prompt/completion tokens; responses: input/output tokens
  const inputTokens = u.prompt_tokens ?? u.input_tokens;
  const outputTokens = u.completion_tokens ?? u.output_tokens;
  return {
    ...(typeof inputTokens === "number" && { inputTokens }),
    ...(typeof outputTokens === "number" && { outputTokens }),
  };
}

/** A chat chunk is content when it carries text, a refusal or a tool call (not just a role). */
export function isChatContent(chunk: unknown): boolean {
  const d = (chunk as Obj | null)?.choices?.[0]?.delta as Obj | undefined;
  return Boolean(d && (d.content || d.refusal || d.tool_calls?.length));
}

/** Responses API stream events. */
export function responsesUsage(event: unknown): Partial<Usage> | undefined {
  const e = event as Obj | null;
  return e?.type === "response.completed" || e?.type === "response.incomplete"
    ? openaiUsage(e.response)
    : undefined;
}

/** Content: any `*.delta` event (text, a function call's arguments, a refusal). */
export function isResponsesContent(event: unknown): boolean {
  const t = (event as Obj | null)?.type;
  return typeof t === "string" && t.endsWith(".delta");
}

/** An `error` or `response.failed` event inside a 200 stream, as an error to classify. */
export function responsesInBand(event: unknown): unknown {
  const e = event as Obj | null;
  if (e?.type === "error")
    return Object.assign(new Error(String(e.message ?? "stream error")), {
      error: { code: e.code, type: e.code },
    });
  if (e?.type === "response.failed") {
    const err = e.response?.error as Obj | undefined;
    return Object.assign(new Error(String(err?.message ?? "response failed")), {
      error: { code: err?.code, type: err?.code },
    });
  }
  return undefined;
}

/**
 * Routes an `openai` client's calls through one policy: `chat.completions.create` and
 * `responses.create`, streaming or not, with the client's own retries off
 * (`withOptions({ maxRetries: 0 })`). Non-streaming calls resolve as before; streaming
 * calls return a GuardedStream (async iterable of the same chunks, plus `.ledger` and
 * `.done`). Everything else on the client passes through, retries off.
 */
export function withBreakwater<C extends OpenAI>(client: C, options: OpenAIAdapterOptions = {}): C {
  const p = asPolicy(options.policy);
  const raw = client.withOptions({ maxRetries: 0 }) as C;
  const includeUsage = options.includeUsage ?? true;

  const route =
    (create: Create, kind: "chat" | "responses") =>
    (params: Obj, request: Obj = {}): Promise<unknown> | GuardedStream<unknown> => {
      const { run, ...req } = request;
      const signal = req.signal as AbortSignal | undefined;
      if (params.stream) {
        const body =
          kind === "chat" && includeUsage && !params.stream_options
            ? { ...params, stream_options: { include_usage: true } }
            : params;
        return p.stream((ctx) => create(body, { ...req, signal: ctx.signal }), {
          ...(signal && { signal }),
          ...runFor(options, run),
          ...(kind === "chat"
            ? { usage: openaiUsage, isContent: isChatContent }
            : { usage: responsesUsage, isContent: isResponsesContent, inspect: responsesInBand }),
        });
      }
      return p.execute((ctx) => create(params, { ...req, signal: ctx.signal }), {
        ...(signal && { signal }),
        ...runFor(options, run),
        usage: openaiUsage,
      });
    };

  const completions = overlay(raw.chat.completions, {
    create: route(raw.chat.completions.create.bind(raw.chat.completions), "chat"),
  });
  const chat = overlay(raw.chat, { completions });
  const responses = overlay(raw.responses, {
    create: route(raw.responses.create.bind(raw.responses), "responses"),
  });
  return overlay(raw, { chat, responses });
}
