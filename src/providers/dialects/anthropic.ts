/** How breakwater reads Anthropic's answers (messages, JSON or events; token counts;
 * batches): usage, content, in-band errors, the answer so far. */
import type { Usage } from "../../index.ts";
import { anthropicAnswer } from "../answers.ts";
import { anthropicTranscript } from "../checks.ts";
import { type Dialect, rewrite, stripLead } from "../dialect.ts";
import { anthropicEffect } from "../effects.ts";

type Obj = Record<string, any>;

/** Usage from a message, or from the `message_start` (input) and `message_delta`
 * (cumulative output) events of a stream. */
export function anthropicUsage(x: unknown): Partial<Usage> | undefined {
  const o = x as Obj | null;
  const u = (o?.type === "message_start" ? o.message?.usage : o?.usage) as Obj | undefined;
  if (!u) return undefined;
  return {
    ...(typeof u.input_tokens === "number" && { inputTokens: u.input_tokens }),
    ...(typeof u.output_tokens === "number" && { outputTokens: u.output_tokens }),
  };
}

/** Content: a delta of a content block (text, a tool call's JSON, thinking). */
export const isAnthropicContent = (event: unknown): boolean =>
  (event as Obj | null)?.type === "content_block_delta";

const isObject = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** How breakwater reads Anthropic's answers: messages (JSON or events), token counts,
 * batches. */
export const anthropicDialect: Dialect = {
  usage: anthropicUsage,
  answer: anthropicAnswer,
  reply: (json) =>
    isObject(json) && json.type === "message"
      ? {
          text: (Array.isArray(json.content) ? json.content : [])
            .map((b: Obj) => (b?.type === "text" ? b.text : ""))
            .join(""),
          finish: json.stop_reason,
        }
      : undefined,
  transcript: anthropicTranscript,
  maxOutput: (body) => body.max_tokens,
  // Assistant prefill: the model goes on from the text so far.
  continueWith: (_url, body, prefix) => ({
    ...body,
    messages: [
      ...(Array.isArray(body.messages) ? body.messages : []),
      { role: "assistant", content: prefix },
    ],
  }),
  resume: (json, event, lead) => {
    if (!isObject(json)) return event;
    // The second message's start and its text block's start: the first ones are open still.
    if (json.type === "message_start" || (json.type === "content_block_start" && json.index === 0))
      return undefined;
    if (lead.strip > 0 && json.type === "content_block_delta" && json.delta?.type === "text_delta")
      return rewrite(event, {
        ...json,
        delta: { ...json.delta, text: stripLead(json.delta.text ?? "", lead) },
      });
    return event;
  },
  marks: { usage: /"usage"\s*:\s*\{/, error: /error/ },
  // `message_stop` ends a message; a `message_delta` with its stop reason is the last word
  // of one whose server leaves `message_stop` out.
  finished: (json) =>
    isObject(json) &&
    (json.type === "message_stop" ||
      json.type === "error" ||
      (json.type === "message_delta" && json.delta?.stop_reason != null)),
  provider: "anthropic",
  effect: anthropicEffect,
  operation: (url) => (/\/messages(?:$|\?)/.test(url) ? "chat" : undefined),
  // A message, or a stream's `message_start`.
  responseModel: (json) => {
    const m = isObject(json)
      ? json.type === "message_start"
        ? json.message?.model
        : json.model
      : undefined;
    return typeof m === "string" ? m : undefined;
  },
  isContent: (json) => isAnthropicContent(json),
  inBand: (json, event) =>
    event.event === "error" || (isObject(json) && json.type === "error")
      ? (json ?? { type: "error", error: { type: "api_error", message: event.data } })
      : undefined,
};
