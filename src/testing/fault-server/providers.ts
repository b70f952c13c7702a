import type { ErrorName } from "./script.ts";

/** What each provider's wire format needs: error bodies, JSON answers, SSE frames. */
export interface WireFormat {
  /** The error body for `status` in this provider's shape. */
  error(status: number, name: ErrorName, message: string, retryAfterS?: number): unknown;
  json(
    model: string,
    text: string,
    input: number,
    output: number,
    stop?: Stop,
    refusal?: string,
    toolCalls?: readonly { name: string; arguments: string; id?: string }[],
  ): unknown;
  /** Frames before the first content delta. */
  start(model: string, input: number): string[];
  delta(
    model: string,
    text: string,
    outputSoFar: number,
    input: number,
    checkpoint?: string,
  ): string;
  /** Frames after the last delta; `tools`: the answer ended with tool calls. */
  end(model: string, input: number, output: number, includeUsage: boolean, stop?: Stop): string[];
  /** A tool call streamed after the text: its opening frames, one piece of its arguments,
   * its closing frames. Dialects without it stream text only. */
  tool?: ToolFrames;
  /** An in-band error event inside a 200 stream. */
  inBand(name: ErrorName, message: string): string;
  /** What the provider sends to keep a quiet stream open. */
  keepalive?(): string;
}

/** How an answer ended, when not as a plain finished text: with tool calls, or cut at the
 * token limit. */
export type Stop = "tools" | "length";

/** A tool call a rule scripts. */
export interface ToolCall {
  readonly name: string;
  readonly arguments: string;
  readonly id?: string;
}

export interface ToolFrames {
  open(model: string, index: number, name: string, id?: string): string[];
  args(model: string, index: number, piece: string): string;
  close(model: string, index: number, call: ToolCall): string[];
}

/** The error a status means when the rule names none. */
export function defaultErrorName(status: number): ErrorName {
  if (status === 400) return "bad_request";
  if (status === 401) return "auth";
  if (status === 403) return "permission";
  if (status === 404) return "not_found";
  if (status === 408 || status === 504) return "timeout";
  if (status === 409) return "conflict";
  if (status === 429) return "rate_limit";
  if (status === 503 || status === 529) return "overloaded";
  if (status >= 500) return "server_error";
  return "bad_request";
}

/** The status each named error stands for: what its body says when it comes in a 200. */
export const ERROR_STATUS: Record<ErrorName, number> = {
  context_length: 400,
  insufficient_quota: 429,
  rate_limit: 429,
  overloaded: 503,
  auth: 401,
  permission: 403,
  not_found: 404,
  timeout: 504,
  conflict: 409,
  server_error: 500,
  bad_request: 400,
  content_filter: 400,
};

export const DEFAULT_MESSAGES: Record<ErrorName, string> = {
  context_length:
    "This model's maximum context length is 128000 tokens; your messages resulted in 250000 tokens.",
  insufficient_quota:
    "You exceeded your current quota, please check your plan and billing details.",
  rate_limit: "Rate limit reached for requests. Please try again later.",
  overloaded: "Overloaded",
  auth: "Incorrect API key provided.",
  permission: "Your API key does not have permission to use this resource.",
  not_found: "The model does not exist or you do not have access to it.",
  timeout: "Request timed out.",
  conflict: "Conflicting concurrent request.",
  server_error: "The server had an error while processing your request.",
  bad_request: "Invalid request.",
  content_filter:
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
};

const sse = (data: unknown, event?: string) =>
  `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

const OPENAI_CODES: Record<ErrorName, [type: string, code: string | null]> = {
  context_length: ["invalid_request_error", "context_length_exceeded"],
  insufficient_quota: ["insufficient_quota", "insufficient_quota"],
  rate_limit: ["requests", "rate_limit_exceeded"],
  overloaded: ["server_error", "server_is_overloaded"],
  auth: ["invalid_request_error", "invalid_api_key"],
  permission: ["invalid_request_error", "unsupported_country_region_territory"],
  not_found: ["invalid_request_error", "model_not_found"],
  timeout: ["server_error", "timeout"],
  conflict: ["invalid_request_error", "conflict"],
  server_error: ["server_error", null],
  bad_request: ["invalid_request_error", null],
  // Azure OpenAI's prompt filter (its `type` is null there; the code is what clients read).
  content_filter: ["invalid_request_error", "content_filter"],
};

let nextId = 0;
const id = (prefix: string) => `${prefix}${(++nextId).toString(36).padStart(8, "0")}`;

/** OpenAI chat completions. */
export const openai: WireFormat = {
  error(_status, name, message) {
    const [type, code] = OPENAI_CODES[name];
    return { error: { message, type, param: name === "context_length" ? "messages" : null, code } };
  },
  json(model, text, input, output, stop, refusal, toolCalls) {
    const calls = toolCalls?.length
      ? toolCalls.map((c, i) => ({
          id: c.id ?? `call_fault${i}`,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        }))
      : undefined;
    return {
      id: id("chatcmpl-"),
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: refusal === undefined && !(calls && text === "") ? text : null,
            refusal: refusal ?? null,
            ...(calls && { tool_calls: calls }),
          },
          logprobs: null,
          finish_reason: calls ? "tool_calls" : stop === "length" ? "length" : "stop",
        },
      ],
      usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
    };
  },
  start(model) {
    return [sse(chunk(model, { role: "assistant", content: "" }, null))];
  },
  delta(model, text) {
    return sse(chunk(model, { content: text }, null));
  },
  tool: {
    open: (model, index, name, callId) => [
      sse(
        chunk(
          model,
          {
            tool_calls: [
              {
                index,
                id: callId ?? `call_fault${index}`,
                type: "function",
                function: { name, arguments: "" },
              },
            ],
          },
          null,
        ),
      ),
    ],
    args: (model, index, piece) =>
      sse(chunk(model, { tool_calls: [{ index, function: { arguments: piece } }] }, null)),
    close: () => [],
  },
  end(model, input, output, includeUsage, stop) {
    const finish = stop === "tools" ? "tool_calls" : stop === "length" ? "length" : "stop";
    const frames = [sse(chunk(model, {}, finish))];
    if (includeUsage) {
      frames.push(
        sse({
          ...chunk(model, {}, null),
          choices: [],
          usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
        }),
      );
    }
    frames.push("data: [DONE]\n\n");
    return frames;
  },
  inBand(name, message) {
    return sse(openai.error(200, name, message));
  },
};

/** The ids a dialect's stream frames carry, made unique per stream by the server (a client
 * that merges messages by id, as LangGraph does, must see two answers as two). */
export const STREAM_IDS = /"(chatcmpl-stream|resp_fault)"/g;

function chunk(model: string, delta: object, finish: string | null) {
  return {
    id: "chatcmpl-stream",
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  };
}

let sequence = 0;
const responseObject = (
  model: string,
  status: string,
  text: string,
  input: number,
  output: number,
  usage: boolean,
) => ({
  id: "resp_fault",
  object: "response",
  created_at: Math.floor(Date.now() / 1000),
  status,
  ...(status === "incomplete" && { incomplete_details: { reason: "max_output_tokens" } }),
  model,
  output:
    status === "completed" || status === "incomplete"
      ? [
          {
            type: "message",
            id: "msg_fault",
            status,
            role: "assistant",
            content: [{ type: "output_text", text, annotations: [] }],
          },
        ]
      : [],
  usage: usage
    ? { input_tokens: input, output_tokens: output, total_tokens: input + output }
    : null,
});

/** OpenAI Responses API: `response.*` events, usage in `response.completed`, `error` events. */
export const openaiResponses: WireFormat = {
  error: openai.error,
  json(model, text, input, output, stop) {
    return responseObject(
      model,
      stop === "length" ? "incomplete" : "completed",
      text,
      input,
      output,
      true,
    );
  },
  start(model) {
    sequence = 0;
    return [
      sse(
        {
          type: "response.created",
          sequence_number: sequence++,
          response: responseObject(model, "in_progress", "", 0, 0, false),
        },
        "response.created",
      ),
      sse(
        {
          type: "response.output_item.added",
          sequence_number: sequence++,
          output_index: 0,
          item: {
            type: "message",
            id: "msg_fault",
            status: "in_progress",
            role: "assistant",
            content: [],
          },
        },
        "response.output_item.added",
      ),
      sse(
        {
          type: "response.content_part.added",
          sequence_number: sequence++,
          item_id: "msg_fault",
          output_index: 0,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] },
        },
        "response.content_part.added",
      ),
    ];
  },
  delta(_model, text) {
    return sse(
      {
        type: "response.output_text.delta",
        sequence_number: sequence++,
        item_id: "msg_fault",
        output_index: 0,
        content_index: 0,
        delta: text,
      },
      "response.output_text.delta",
    );
  },
  // Function call n is output item n + 1, after the message.
  tool: {
    open(_model, index, name, id) {
      const item = { type: "function_call", id: `fc_fault${index}`, status: "in_progress" };
      const call = { ...item, call_id: id ?? `call_fault${index}`, name, arguments: "" };
      const added = { type: "response.output_item.added", output_index: index + 1, item: call };
      return [sse({ ...added, sequence_number: sequence++ }, added.type)];
    },
    args(_model, index, piece) {
      const type = "response.function_call_arguments.delta";
      const at = { item_id: `fc_fault${index}`, output_index: index + 1 };
      return sse({ type, sequence_number: sequence++, ...at, delta: piece }, type);
    },
    close(_model, index, c) {
      const type = "response.output_item.done";
      const item = {
        type: "function_call",
        id: `fc_fault${index}`,
        status: "completed",
        call_id: c.id ?? `call_fault${index}`,
        name: c.name,
        arguments: c.arguments,
      };
      return [sse({ type, sequence_number: sequence++, output_index: index + 1, item }, type)];
    },
  },
  end(model, input, output, _usage, stop) {
    const type = stop === "length" ? "response.incomplete" : "response.completed";
    const status = stop === "length" ? "incomplete" : "completed";
    return [
      sse(
        {
          type,
          sequence_number: sequence++,
          response: responseObject(model, status, "", input, output, true),
        },
        type,
      ),
    ];
  },
  inBand(name, message) {
    const [, code] = OPENAI_CODES[name];
    return sse(
      {
        type: "error",
        sequence_number: sequence++,
        code: code ?? "server_error",
        message,
        param: null,
      },
      "error",
    );
  },
};

const ANTHROPIC_TYPES: Record<ErrorName, string> = {
  context_length: "invalid_request_error",
  insufficient_quota: "billing_error",
  rate_limit: "rate_limit_error",
  overloaded: "overloaded_error",
  auth: "authentication_error",
  permission: "permission_error",
  not_found: "not_found_error",
  timeout: "timeout_error",
  conflict: "invalid_request_error",
  server_error: "api_error",
  bad_request: "invalid_request_error",
  content_filter: "invalid_request_error",
};

/** Anthropic messages. */
export const anthropic: WireFormat = {
  error(_status, name, message) {
    const text =
      name === "context_length" ? "prompt is too long: 250000 tokens > 200000 maximum" : message;
    return { type: "error", error: { type: ANTHROPIC_TYPES[name], message: text } };
  },
  json(model, text, input, output, stop) {
    return {
      id: id("msg_"),
      type: "message",
      role: "assistant",
      model,
      content: [{ type: "text", text }],
      stop_reason: stop === "length" ? "max_tokens" : "end_turn",
      stop_sequence: null,
      usage: { input_tokens: input, output_tokens: output },
    };
  },
  start(model, input) {
    const message = {
      id: id("msg_"),
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: input, output_tokens: 1 },
    };
    return [
      sse({ type: "message_start", message }, "message_start"),
      sse(
        { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
        "content_block_start",
      ),
      sse({ type: "ping" }, "ping"),
    ];
  },
  delta(_model, text) {
    return sse(
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } },
      "content_block_delta",
    );
  },
  // Block 0 is the text; tool call n is block n + 1, opened once the text block closed.
  tool: {
    open: (_model, index, name) => [
      ...(index === 0 ? [sse({ type: "content_block_stop", index: 0 }, "content_block_stop")] : []),
      sse(
        {
          type: "content_block_start",
          index: index + 1,
          content_block: { type: "tool_use", id: `toolu_fault${index}`, name, input: {} },
        },
        "content_block_start",
      ),
    ],
    args: (_model, index, piece) =>
      sse(
        {
          type: "content_block_delta",
          index: index + 1,
          delta: { type: "input_json_delta", partial_json: piece },
        },
        "content_block_delta",
      ),
    close: (_model, index) => [
      sse({ type: "content_block_stop", index: index + 1 }, "content_block_stop"),
    ],
  },
  end(_model, _input, output, _usage, stop) {
    const tools = stop === "tools";
    return [
      ...(tools ? [] : [sse({ type: "content_block_stop", index: 0 }, "content_block_stop")]),
      sse(
        {
          type: "message_delta",
          delta: {
            stop_reason: tools ? "tool_use" : stop === "length" ? "max_tokens" : "end_turn",
            stop_sequence: null,
          },
          usage: { output_tokens: output },
        },
        "message_delta",
      ),
      sse({ type: "message_stop" }, "message_stop"),
    ];
  },
  keepalive() {
    return sse({ type: "ping" }, "ping");
  },
  inBand(name, message) {
    return sse(anthropic.error(200, name, message), "error");
  },
};

const GEMINI_STATUS: Record<ErrorName, string> = {
  context_length: "INVALID_ARGUMENT",
  insufficient_quota: "RESOURCE_EXHAUSTED",
  rate_limit: "RESOURCE_EXHAUSTED",
  overloaded: "UNAVAILABLE",
  auth: "UNAUTHENTICATED",
  permission: "PERMISSION_DENIED",
  not_found: "NOT_FOUND",
  timeout: "DEADLINE_EXCEEDED",
  conflict: "ABORTED",
  server_error: "INTERNAL",
  bad_request: "INVALID_ARGUMENT",
  content_filter: "INVALID_ARGUMENT",
};

/** Gemini generateContent. */
export const gemini: WireFormat = {
  error(status, name, message, retryAfterS) {
    const details: unknown[] = [];
    if (name === "insufficient_quota") {
      // What a spent daily quota looks like on the wire: a QuotaFailure naming a per-day quota.
      details.push({
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        violations: [
          {
            quotaMetric: "generativelanguage.googleapis.com/generate_content_requests",
            quotaId: "GenerateRequestsPerDayPerProjectPerModel",
          },
        ],
      });
    }
    if (retryAfterS !== undefined && GEMINI_STATUS[name] === "RESOURCE_EXHAUSTED") {
      details.push({
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        retryDelay: `${retryAfterS}s`,
      });
    }
    const text =
      name === "context_length"
        ? "The input token count (250000) exceeds the maximum number of tokens allowed (128000)."
        : message;
    return {
      error: {
        code: status,
        message: text,
        status: GEMINI_STATUS[name],
        ...(details.length > 0 && { details }),
      },
    };
  },
  json(model, text, input, output, stop) {
    const finishReason = stop === "length" ? "MAX_TOKENS" : "STOP";
    return {
      candidates: [{ content: { parts: [{ text }], role: "model" }, finishReason, index: 0 }],
      usageMetadata: {
        promptTokenCount: input,
        candidatesTokenCount: output,
        totalTokenCount: input + output,
      },
      modelVersion: model,
    };
  },
  start() {
    return [];
  },
  delta(model, text, outputSoFar, input, checkpoint) {
    return sse({
      candidates: [
        {
          content: { parts: [{ text }], role: "model" },
          index: 0,
          ...(checkpoint !== undefined && { continuationToken: checkpoint }),
        },
      ],
      usageMetadata: {
        promptTokenCount: input,
        candidatesTokenCount: outputSoFar,
        totalTokenCount: input + outputSoFar,
      },
      modelVersion: model,
    });
  },
  end(model, input, output, _usage, stop) {
    const finishReason = stop === "length" ? "MAX_TOKENS" : "STOP";
    return [
      sse({
        candidates: [{ content: { parts: [{ text: "" }], role: "model" }, finishReason, index: 0 }],
        usageMetadata: {
          promptTokenCount: input,
          candidatesTokenCount: output,
          totalTokenCount: input + output,
        },
        modelVersion: model,
      }),
    ];
  },
  inBand(name, message) {
    return sse(gemini.error(503, name, message));
  },
};

export const DIALECTS = { openai, anthropic, gemini } as const;
