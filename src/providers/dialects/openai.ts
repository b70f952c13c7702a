/** The last event of a stream that ended its answer, short of `[DONE]` (OpenAI-compatible
 * servers that leave it out): a chunk with a finish reason, the usage chunk after it, or a
 * Responses stream's final event. */
function openaiFinished(json: unknown): boolean {
  if (!isObject(json)) return false;
  // A Responses stream ends with its final event; other typed streams (images, audio) are
  // not judged.
  if (typeof json.type === "string")
    return !json.type.startsWith("response.") || RESPONSES_ENDS.has(json.type);
  const choices = json.choices;
  if (!Array.isArray(choices)) return false;
  return choices.length === 0
    ? isObject(json.usage)
    : choices.some((c) => c?.finish_reason != null);
}
const RESPONSES_ENDS = new Set([
  "response.completed",
  "response.incomplete",
  "response.failed",
  "error",
]);

/** How breakwater reads OpenAI's answers (chat completions, the Responses API, legacy
 * completions, embeddings): usage, content, in-band errors, the answer so far. */
import type { Usage } from "../../index.ts";
import { chatAnswer, responsesAnswer } from "../answers.ts";
import { chatTranscript } from "../checks.ts";
import { type Dialect, type Lead, pathOf, rewrite, stripLead } from "../dialect.ts";
import { openaiEffect } from "../effects.ts";
import type { SseEvent } from "../sse.ts";

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

/** A chat chunk is content when it carries text, a refusal, a tool call's arguments or
 * reasoning (`reasoning_content`: DeepSeek, vLLM; `reasoning`: OpenRouter), not just a
 * role, usage or a tool call's announcement. */
export function isChatContent(chunk: unknown): boolean {
  const d = (chunk as Obj | null)?.choices?.[0]?.delta as Obj | undefined;
  return Boolean(
    d && (d.content || d.refusal || argued(d.tool_calls) || d.reasoning_content || d.reasoning),
  );
}

/** Tool calls with some arguments: a call's announcement (its id and name, arguments "")
 * is a head, like a role chunk; a retry announces it again. */
const argued = (calls: unknown): boolean =>
  Array.isArray(calls) && calls.some((c: Obj | null) => Boolean(c?.function?.arguments));

/** Responses API stream events. */
export function responsesUsage(event: unknown): Partial<Usage> | undefined {
  const e = event as Obj | null;
  return e?.type === "response.completed" || e?.type === "response.incomplete"
    ? openaiUsage(e.response)
    : undefined;
}

/** Content: any `*.delta` event with something in it (text, a function call's arguments, a
 * refusal); `response.output_item.added` announcing a call is a head. */
export function isResponsesContent(event: unknown): boolean {
  const e = event as Obj | null;
  return typeof e?.type === "string" && e.type.endsWith(".delta") && e.delta !== "";
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
    finished: (json, event) => event.data.trim() === "[DONE]" || openaiFinished(json),
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
