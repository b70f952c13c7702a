import {
  classify,
  type Effect,
  type FailureKind,
  type PartialAnswer,
  type Usage,
} from "../index.ts";
import type { CheckDialect } from "./checks.ts";
import { ReadResponse } from "./read-response.ts";
import { SseEvent } from "./sse.ts";

/** How to read one provider's answers. Every function is handed parsed JSON (undefined when
 * the body or event is not JSON). */
export interface Dialect extends CheckDialect {
  /** Usage from a JSON answer or one stream event. */
  usage?(json: unknown): Partial<Usage> | undefined;
  /** A stream event that carries content (text, a tool call, reasoning): once one reached
   * the SDK, nothing is retried. */
  isContent(json: unknown, event: SseEvent): boolean;
  /** The provider's error inside a 200 stream, as an error to classify. */
  inBand?(json: unknown, event: SseEvent): unknown;
  /** After content, an in-band error event reaches the SDK as it came (the SDK raises its
   * own error, and reads the call's outcome off the answer's headers); `false` for an SDK
   * whose error keeps no headers (@google/genai): the body errors instead, with breakwater's
   * error. Default: true. */
  handsOnInBand?: boolean;
  /** Changes a streaming request's JSON body before it is sent (the usage chunk of an OpenAI
   * stream). */
  prepare?(url: string, body: Record<string, unknown>): Record<string, unknown> | undefined;
  /** Continuation: the request body that asks the model to go on from `prefix`, or
   * undefined where the provider cannot. */
  continueWith?(
    url: string,
    body: Record<string, unknown>,
    prefix: string,
  ): Record<string, unknown> | undefined;
  /** A continuation's event as the SDK should read it, going on with the first answer:
   * undefined drops it (the second answer's preamble). `lead` holds the whitespace the
   * prefix was trimmed of, to take off the continuation's first text. */
  resume?(json: unknown, event: SseEvent, lead: Lead): SseEvent | undefined;
  /** The answer so far, from the parsed events a broken stream delivered. */
  answer?(events: readonly unknown[]): PartialAnswer;
  /** Cheap tests on an event's raw text: only events that pass are parsed for usage or for
   * an error (most chunks are neither). Once content flows, a read of whole events that no
   * mark matches goes on unparsed, so a mark must match every event that may carry usage or
   * an error, among others in one read too. A mark that holds only at an edge of the text
   * (`$`, `\B`, `^` without `m`) or looks around keeps every event read; one in ASCII that
   * takes no single character of any kind (`.`, `[^...]`, `\S`, `\W`, `\D`) is tested on
   * the read's bytes, where `\s` takes no non-ASCII space (JSON has none between its
   * tokens). Default: every event. */
  marks?: { usage?: RegExp; error?: RegExp };
  /** The data of the event after which the provider's SDK stops reading a stream and lets
   * the body go (openai's `[DONE]`: openai >= 7.5 cancels the body there): the read that
   * ends with it is handed on once the stream behind it has ended and been checked.
   * Default: none (the SDK reads to the body's end). */
  endMark?: string;
  /** Whether a stream whose last event is this one ended as the provider ends an answer
   * (openai's `[DONE]` or a finish reason, a Responses stream's `response.completed`,
   * Anthropic's `message_stop`, Gemini's `finishReason`). A body that ends after any other
   * event ended early, however politely it closed: the upstream's failure
   * (`stream_unfinished`), retried before content, an interruption after it. Default: any
   * end of the body ends the answer. */
  finished?(json: unknown, event: SseEvent): boolean;
  /** Who serves it, in the GenAI conventions' words (`gen_ai.provider.name`). */
  provider?: string;
  /** What a request asks for (`gen_ai.operation.name`): "chat", "embeddings", ... */
  operation?(url: string): string | undefined;
  /** The model a request asks for. Default: the body's `model`. */
  model?(url: string, body: unknown): string | undefined;
  /** The model that answered, from a JSON answer or a stream event. Default: `model`. */
  responseModel?(json: unknown): string | undefined;
  /** What sending the request again does: "unsafe" for one that changes state on the
   * server each time it arrives (rule 20). Default: "read" for GET and HEAD, else
   * "idempotent". */
  effect?(method: string, url: string, body: unknown): Effect;
}

const isObj = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === "object";

/** A 2xx JSON answer that is an error (`{ "error": { ... } }`, as gateways and some
 * providers send): its body, else undefined. An answer that carries one (choices, output,
 * candidates, content) is an answer, whatever else it says. */
export function errorBodyOf(json: unknown): Record<string, unknown> | undefined {
  if (!isObj(json) || !isObj(json.error)) return undefined;
  for (const key of ["choices", "output", "candidates", "content", "data"]) {
    const v = json[key];
    if (Array.isArray(v) ? v.length > 0 : v !== undefined && v !== null) return undefined;
  }
  return json;
}

/** The status an error in a 2xx body stands for, by what its error says (a 429 for a rate
 * limit, 503 for an overload, 500 when it says nothing known). */
export function errorBodyStatus(body: Record<string, unknown>): number {
  return STATUS_OF_KIND[classify({ error: body.error }).kind] ?? 500;
}

const STATUS_OF_KIND: Partial<Record<FailureKind, number>> = {
  rate_limited: 429,
  quota_exhausted: 429,
  overloaded: 503,
  timeout: 504,
  auth: 401,
  not_found: 404,
  invalid_request: 400,
  context_exceeded: 400,
  content_filtered: 400,
};

/** A 2xx JSON answer whose body is an error, as the answer of the status it stands for;
 * else the answer, read once and handed on as the fetch layer hands a JSON answer on (its
 * text and parsed value kept). For an SDK's fetch where breakwater retries above the SDK:
 * the SDK then raises its own error of that class, which the policy classifies. */
export async function errorBodyAsStatus(res: Response): Promise<Response> {
  if (!res.ok || res.body === null || !res.headers.get("content-type")?.includes("json"))
    return res;
  const text = await res.text();
  const json = safeJson(text);
  const error = errorBodyOf(json);
  if (error === undefined) return new ReadResponse(text, res, json);
  const status = errorBodyStatus(error);
  return new Response(text, { status, statusText: "error in a 2xx body", headers: res.headers });
}

/** `text` parsed, or undefined when it is not JSON. */
export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A URL without its query: what the dialects' readings go by (every request asks). */
export function pathOf(url: string): string {
  const q = url.indexOf("?");
  return q === -1 ? url : url.slice(0, q);
}

const str = (x: unknown) => (typeof x === "string" && x !== "" ? x : undefined);

/** The model a request asks for: the dialect's reading, else the body's `model`. */
export function requestModel(
  d: Dialect | undefined,
  url: string,
  body: unknown,
): string | undefined {
  if (d?.model !== undefined) return d.model(url, body);
  return str((body as { model?: unknown } | null | undefined)?.model);
}

/** The model that answered: the dialect's reading, else the answer's `model`. */
export function answeringModel(d: Dialect | undefined, json: unknown): string | undefined {
  if (d?.responseModel !== undefined) return d.responseModel(json);
  return str((json as { model?: unknown } | null | undefined)?.model);
}

/** Whitespace the prefix was trimmed of (`strip`), and how much of it the continuation's
 * first text gave back and was taken off (`taken`). */
export interface Lead {
  strip: number;
  taken: number;
}

/** Takes up to `lead.strip` whitespace characters off the start of the first text. */
export function stripLead(text: string, lead: Lead): string {
  let i = 0;
  while (i < lead.strip && i < text.length && /\s/.test(text[i]!)) i++;
  lead.strip = 0;
  lead.taken = i;
  return text.slice(i);
}

/** An event rewritten with new data (its name kept). */
export function rewrite(event: SseEvent, data: unknown): SseEvent {
  const name = event.event === undefined ? "" : `event: ${event.event}\n`;
  return new SseEvent(`${name}data: ${JSON.stringify(data)}\n\n`);
}
