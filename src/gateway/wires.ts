import type { Wire } from "./config.ts";

/** One client request, read: its wire format, the model it asks for, whether it streams,
 * and where it goes on an upstream of the same format. */
export interface ClientCall {
  readonly wire: Wire;
  /** What it asks for, in the GenAI conventions' words. */
  readonly operation: "chat" | "responses" | "embeddings" | "text_completion" | "count_tokens";
  readonly model: string | undefined;
  readonly stream: boolean;
  /** The path and query to append to an upstream's base URL, asking for `model`. */
  upstreamPath(model: string): string;
  /** The body to send, asking for `model` (the client's own text when it is the same). */
  bodyFor(model: string): string;
  /** The object that body is the JSON of (read, never changed): the fetch layer reads it
   * rather than parsing the body again. */
  jsonFor(model: string): Json | undefined;
}

type Json = Record<string, unknown>;

const OPENAI = /^\/v1\/(chat\/completions|responses|embeddings|completions)\/?$/;
const ANTHROPIC = /^\/v1\/messages(\/count_tokens)?\/?$/;
const GOOGLE =
  /^\/(v1beta|v1)\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens|embedContent)$/;

const OPERATIONS = {
  "chat/completions": "chat",
  responses: "responses",
  embeddings: "embeddings",
  completions: "text_completion",
} as const;

/** A body with its model replaced, or the client's own text when it asks for the same. */
function renamed(text: string, json: Json | undefined, model: string): string {
  if (json === undefined || json.model === model) return text;
  return JSON.stringify({ ...json, model });
}

/** The query a client sent, without its key (the gateway's own, never passed on). */
function queryOf(search: string): string {
  const q = new URLSearchParams(search);
  q.delete("key");
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

/** Reads a request: undefined when no wire format knows its method and path. */
export function readCall(
  method: string,
  path: string,
  search: string,
  text: string,
  json: Json | undefined,
): ClientCall | undefined {
  if (method !== "POST") return undefined;
  const model = typeof json?.model === "string" ? json.model : undefined;
  const stream = json?.stream === true;
  const body = (m: string) => renamed(text, json, m);
  const jsonFor = (m: string) =>
    json === undefined || json.model === m ? json : { ...json, model: m };
  const o = OPENAI.exec(path);
  if (o !== null) {
    const tail = o[1] as keyof typeof OPERATIONS;
    return {
      wire: "openai",
      operation: OPERATIONS[tail],
      model,
      stream,
      upstreamPath: () => `/${tail}${queryOf(search)}`,
      bodyFor: body,
      jsonFor,
    };
  }
  const a = ANTHROPIC.exec(path);
  if (a !== null)
    return {
      wire: "anthropic",
      operation: a[1] === undefined ? "chat" : "count_tokens",
      model,
      stream,
      upstreamPath: () => `${path}${queryOf(search)}`,
      bodyFor: body,
      jsonFor,
    };
  const g = GOOGLE.exec(path);
  if (g === null) return undefined;
  const [, version, asked, verb] = g as unknown as [string, string, string, string];
  return {
    wire: "google",
    operation:
      verb === "embedContent" ? "embeddings" : verb === "countTokens" ? "count_tokens" : "chat",
    model: decodeURIComponent(asked),
    stream: verb === "streamGenerateContent",
    upstreamPath: (m) => `/${version}/models/${encodeURIComponent(m)}:${verb}${queryOf(search)}`,
    bodyFor: () => text,
    jsonFor: () => json,
  };
}

/** The wire a path looks like, for an error before the request is read (a bad body). */
export function wireOfPath(path: string): Wire {
  if (ANTHROPIC.test(path)) return "anthropic";
  if (GOOGLE.test(path)) return "google";
  return "openai";
}

/** Google's status names for the HTTP statuses the gateway answers with. */
const GOOGLE_STATUS: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  404: "NOT_FOUND",
  405: "INVALID_ARGUMENT",
  413: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

/** Anthropic's error types for the same. */
const ANTHROPIC_TYPE: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
};

/** An error's body as the client's SDK reads one: its status's kind, our code and words. */
export function errorBody(wire: Wire, status: number, code: string, message: string): string {
  if (wire === "anthropic")
    return JSON.stringify({
      type: "error",
      error: { type: ANTHROPIC_TYPE[status] ?? "api_error", message: `${message} (${code})` },
    });
  if (wire === "google")
    return JSON.stringify({
      error: {
        code: status,
        message: `${message} (${code})`,
        status: GOOGLE_STATUS[status] ?? "UNKNOWN",
      },
    });
  const type =
    status === 401 ? "invalid_api_key" : status < 500 ? "invalid_request_error" : "server_error";
  return JSON.stringify({ error: { message, type, code, param: null } });
}

/** The event that ends a stream broken after content, in the client's format: its SDK raises
 * an error (never `[DONE]`, never a clean end of a cut answer). */
export function streamErrorEvent(
  wire: Wire,
  operation: string,
  code: string,
  message: string,
): string {
  if (wire === "anthropic")
    return `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "api_error", message: `${message} (${code})` } })}\n\n`;
  if (wire === "google")
    return `data: ${JSON.stringify({ error: { code: 500, message: `${message} (${code})`, status: "INTERNAL" } })}\n\n`;
  if (operation === "responses")
    return `event: error\ndata: ${JSON.stringify({ type: "error", code, message, param: null })}\n\n`;
  return `data: ${JSON.stringify({ error: { message, type: "server_error", code, param: null } })}\n\n`;
}

/** The upstream's own key, in the header its API reads; the client's key never goes on. */
export function upstreamAuth(wire: Wire, key: string): Record<string, string> {
  if (wire === "anthropic") return { "x-api-key": key };
  if (wire === "google") return { "x-goog-api-key": key };
  return { authorization: `Bearer ${key}` };
}

/** The key a client presents, whichever SDK sent it. */
export function clientKey(
  headers: Record<string, string | string[] | undefined>,
  search: string,
): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === "string" && /^Bearer\s+/i.test(auth)) return auth.replace(/^Bearer\s+/i, "");
  for (const h of ["x-api-key", "x-goog-api-key"]) {
    const v = headers[h];
    if (typeof v === "string" && v !== "") return v;
  }
  return new URLSearchParams(search).get("key") ?? undefined;
}

/** The client's headers an upstream reads (its API's version and betas, an idempotency
 * key); nothing that names the client's key or the connection. */
export const FORWARDED_HEADERS = [
  "anthropic-version",
  "anthropic-beta",
  "idempotency-key",
  "accept",
];
