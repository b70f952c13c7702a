/**
 * The OpenAI adapter: the official client, with breakwater as its only retry layer
 * (every method: chat, responses, embeddings, streams, helpers).
 *
 * @example
 * ```ts
 * import OpenAI from "openai";
 * import { withBreakwater } from "breakwater/openai";
 *
 * const client = withBreakwater(new OpenAI()); // its own retries off; the policy's defaults on
 * const r = await client.chat.completions.create({
 *   model: "gpt-4o-mini",
 *   messages: [{ role: "user", content: "Hello" }],
 * });
 * console.log(r.choices[0]?.message.content);
 * ```
 * @module breakwater/openai
 */
import type OpenAI from "openai";
import type { Usage } from "../index.ts";
import { opt } from "../internal.ts";
import { chatAnswer, responsesAnswer } from "./answers.ts";
import { chatTranscript } from "./checks.ts";
import { type Lead, pathOf, rewrite, stripLead } from "./dialect.ts";
import { openaiEffect } from "./effects.ts";
import { type Dialect, type GuardedFetchOptions, guardedFetch } from "./fetch.ts";
import { scopedClient } from "./scope.ts";
import { adapterOptions, checkClient, FETCH_SPEC } from "./shared.ts";

const OWNER = "openai.withBreakwater";
const SPEC = { ...FETCH_SPEC, includeUsage: opt.bool(true) };

import type { SseEvent } from "./sse.ts";

export { callOptions } from "./fetch.ts";

/** What `withBreakwater` takes for an openai client: the fetch layer's options (policy, run, connect timeout, attempt header, continuation, truncation, context window) and the usage chunk. */
export interface OpenAIAdapterOptions extends Omit<GuardedFetchOptions, "dialect" | "fetch"> {
  /** Ask for the usage chunk on streams (`stream_options.include_usage`). Default true. */
  includeUsage?: boolean;
}

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

/** A chat chunk is content when it carries text, a refusal, a tool call or reasoning
 * (`reasoning_content`: DeepSeek, vLLM; `reasoning`: OpenRouter), not just a role or usage. */
export function isChatContent(chunk: unknown): boolean {
  const d = (chunk as Obj | null)?.choices?.[0]?.delta as Obj | undefined;
  return Boolean(
    d && (d.content || d.refusal || d.tool_calls?.length || d.reasoning_content || d.reasoning),
  );
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

const isObject = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** The text of a Responses API response (what `output_text` joins). */
function responsesText(r: Obj): string {
  const parts: string[] = [];
  for (const item of Array.isArray(r.output) ? r.output : [])
    for (const c of Array.isArray(item?.content) ? item.content : [])
      if (c?.type === "output_text" && typeof c.text === "string") parts.push(c.text);
  return parts.join("");
}

/** A JSON answer's text, finish and refusal: the Responses API's or chat's. */
function openaiReply(json: unknown) {
  if (!isObject(json)) return undefined;
  if (json.object === "response")
    return { text: responsesText(json), finish: json.incomplete_details?.reason ?? json.status };
  const choice = json.choices?.[0];
  if (!isObject(choice)) return undefined;
  return {
    text: choice.message?.content ?? choice.text,
    finish: choice.finish_reason,
    refusal: choice.message?.refusal ?? undefined,
  };
}

/** A continuation's chat chunk as the SDK should read it: the second answer's role chunk
 * dropped, the lead whitespace taken off its first text. */
function resumeChat(json: unknown, event: SseEvent, lead: Lead): SseEvent | undefined {
  const delta = isObject(json) ? json.choices?.[0]?.delta : undefined;
  if (!isObject(json) || !isObject(delta)) return event;
  if (delta.role !== undefined && !delta.content && !delta.tool_calls) return undefined;
  if (lead.strip > 0 && typeof delta.content === "string" && delta.content !== "") {
    const content = stripLead(delta.content, lead);
    return rewrite(event, {
      ...json,
      choices: [{ ...json.choices[0], delta: { ...delta, content } }],
    });
  }
  return event;
}

/** `gen_ai.operation.name` of an OpenAI request, by its path. */
function openaiOperation(url: string): string | undefined {
  const path = pathOf(url);
  if (path.endsWith("/chat/completions") || path.endsWith("/responses")) return "chat";
  if (path.endsWith("/embeddings")) return "embeddings";
  if (path.endsWith("/completions")) return "text_completion";
  return undefined;
}

/** How breakwater reads OpenAI's answers: chat completions, the Responses API, legacy
 * completions and embeddings, JSON or streamed. */
export function openaiDialect(includeUsage = true): Dialect {
  return {
    usage: (json) => openaiUsage(json) ?? responsesUsage(json),
    isContent: (json) =>
      isObject(json) &&
      (typeof json.type === "string"
        ? isResponsesContent(json)
        : isChatContent(json) || Boolean(json.choices?.[0]?.text)),
    inBand: (json) => {
      if (!isObject(json)) return undefined;
      if (typeof json.type === "string") return responsesInBand(json);
      return isObject(json.error) ? { error: json.error } : undefined;
    },
    answer: (events) =>
      events.some((e) => isObject(e) && typeof e.type === "string")
        ? responsesAnswer(events)
        : chatAnswer(events),
    reply: openaiReply,
    transcript: (url, body) =>
      url.endsWith("/chat/completions") ? chatTranscript(url, body) : undefined,
    maxOutput: (body) => body.max_completion_tokens ?? body.max_tokens ?? body.max_output_tokens,
    // OpenAI-compatible servers with an assistant prefix (DeepSeek, Mistral): chat only.
    continueWith: (url, body, prefix) =>
      url.endsWith("/chat/completions")
        ? {
            ...body,
            messages: [
              ...(Array.isArray(body.messages) ? body.messages : []),
              { role: "assistant", content: prefix, prefix: true },
            ],
          }
        : undefined,
    resume: resumeChat,
    marks: { usage: /"usage"\s*:\s*\{/, error: /error|response\.failed/ },
    endMark: "[DONE]",
    provider: "openai",
    effect: openaiEffect,
    operation: openaiOperation,
    // Chat answers and chunks, a response, a Responses stream's events (`response.*`).
    responseModel: (json) => {
      const m = isObject(json) ? (json.model ?? json.response?.model) : undefined;
      return typeof m === "string" ? m : undefined;
    },
    prepare: (url, body) =>
      includeUsage &&
      body.stream === true &&
      !body.stream_options &&
      url.endsWith("/chat/completions")
        ? { ...body, stream_options: { include_usage: true } }
        : undefined,
  };
}

/**
 * Routes every request of an `openai` client through one policy: the client returned is the
 * SDK's own (`withOptions({ maxRetries: 0, fetch })`), so every method, helper and type
 * works as documented (`parse`, `stream`, `withResponse`, `toReadableStream`, ...), and each
 * HTTP request it sends is retried by breakwater alone. A stream is retried until its first
 * content event, then passed through; chat streams ask for the usage chunk unless
 * `includeUsage: false`. Per call: `create(params, callOptions({ run }))`.
 */
export function withBreakwater<C extends OpenAI>(client: C, options: OpenAIAdapterOptions = {}): C {
  checkClient(
    client,
    OWNER,
    "an openai client (new OpenAI()), not another SDK's",
    (c) => typeof c.chat?.completions?.create === "function",
  );
  const { includeUsage } = adapterOptions(OWNER, SPEC, options);
  const { includeUsage: _, ...rest } = options;
  const fetch = guardedFetch({
    ...rest,
    fetch: (client as unknown as { fetch?: typeof globalThis.fetch }).fetch,
    dialect: openaiDialect(includeUsage),
  });
  return scopedClient(client.withOptions({ maxRetries: 0, fetch, ...azure(client) }) as C, OWNER);
}

/** What an AzureOpenAI client's `withOptions` does not carry over (its constructor then
 * throws without OPENAI_API_VERSION set, and the deployment is lost): its own again. */
function azure(client: OpenAI): { apiVersion?: string; deployment?: string } {
  const c = client as unknown as { apiVersion?: unknown; deploymentName?: unknown };
  if (typeof c.apiVersion !== "string" || c.apiVersion === "") return {};
  return {
    apiVersion: c.apiVersion,
    ...(typeof c.deploymentName === "string" && { deployment: c.deploymentName }),
  };
}
