import type { Failure, FailureKind } from "./failure.ts";
import { RETRYABLE_KINDS } from "./failure.ts";
import { readHeader } from "./headers.ts";
import { parseRetryAfter, parseRetryAfterValue } from "./retry-after.ts";

/** A lookup table that cannot be fooled by "toString" or "constructor" (it is a Map). */
const table = (entries: Record<string, FailureKind>): ReadonlyMap<string, FailureKind> =>
  new Map(Object.entries(entries));

/**
 * Provider error codes we recognise (OpenAI `code`/`type`, Anthropic `error.type`, Gemini
 * `error.status`, AI SDK `data.error`). A recognised code wins over the HTTP status: a
 * quota 429 is not a rate limit. An unrecognised code falls through to the status, so a
 * code invented tomorrow cannot silently switch retry off.
 */
const PROVIDER_CODES: ReadonlyMap<string, FailureKind> = table({
  insufficient_quota: "quota_exhausted",
  billing_error: "quota_exhausted",
  billing_hard_limit_reached: "quota_exhausted",
  quota_exceeded: "quota_exhausted",
  context_length_exceeded: "context_exceeded",
  string_above_max_length: "context_exceeded",
  request_too_large: "context_exceeded",
  invalid_api_key: "auth",
  authentication_error: "auth",
  permission_error: "auth",
  permission_denied: "auth",
  unauthenticated: "auth",
  invalid_request_error: "invalid_request",
  invalid_argument: "invalid_request",
  failed_precondition: "invalid_request",
  not_found_error: "not_found",
  model_not_found: "not_found",
  not_found: "not_found",
  rate_limit_exceeded: "rate_limited",
  rate_limit_error: "rate_limited",
  resource_exhausted: "rate_limited",
  overloaded_error: "overloaded",
  server_is_overloaded: "overloaded",
  unavailable: "overloaded",
  slow_down: "overloaded",
  api_error: "server_error",
  server_error: "server_error",
  internal: "server_error",
  internal_error: "server_error",
  deadline_exceeded: "timeout",
  timeout_error: "timeout",
  content_filter: "content_filtered",
  content_policy_violation: "content_filtered",
});

/** Node/undici network codes. Timeouts are retryable timeouts; the rest are transport. */
const NETWORK_CODES: ReadonlyMap<string, FailureKind> = table({
  ECONNRESET: "transport",
  ECONNREFUSED: "transport",
  ECONNABORTED: "transport",
  EPIPE: "transport",
  ENOTFOUND: "transport",
  EAI_AGAIN: "transport",
  EHOSTUNREACH: "transport",
  ENETUNREACH: "transport",
  ENETDOWN: "transport",
  ETIMEDOUT: "timeout",
  UND_ERR_SOCKET: "transport",
  UND_ERR_CLOSED: "transport",
  UND_ERR_CONNECT_TIMEOUT: "timeout",
  UND_ERR_HEADERS_TIMEOUT: "timeout",
  UND_ERR_BODY_TIMEOUT: "timeout",
});

/** SDK error classes with no status that mean the connection failed. */
const TRANSPORT_NAMES = new Set(["APIConnectionError", "FetchError"]);
const TIMEOUT_NAMES = new Set(["TimeoutError", "APIConnectionTimeoutError", "AttemptTimeoutError"]);
const CANCEL_NAMES = new Set(["AbortError", "APIUserAbortError"]);

/** Context-length errors that arrive with a generic code (Anthropic, Gemini, older OpenAI). */
const CONTEXT_MESSAGE =
  /prompt is too long|context length|context window|maximum context|too many tokens|exceeds the maximum number of tokens/i;

type Obj = Record<string, unknown>;
const isObj = (x: unknown): x is Obj => x !== null && typeof x === "object";
const str = (x: unknown): string | undefined => (typeof x === "string" && x !== "" ? x : undefined);

function statusOf(e: Obj): number | undefined {
  const resp = e.response;
  for (const v of [e.status, e.statusCode, isObj(resp) ? resp.status : undefined]) {
    const n = typeof v === "string" ? Number(v) : v;
    if (typeof n === "number" && Number.isInteger(n) && n >= 100 && n <= 599) return n;
  }
  return undefined;
}

function headersOf(e: Obj): unknown {
  const resp = e.response;
  return e.headers ?? e.responseHeaders ?? (isObj(resp) ? resp.headers : undefined);
}

/** Candidate provider codes, most specific first. */
function codesOf(e: Obj): string[] {
  const out: string[] = [];
  const add = (v: unknown) => {
    const s = str(v);
    if (s !== undefined && s !== "error") out.push(s);
  };
  const body = isObj(e.error)
    ? e.error
    : isObj(e.data) && isObj(e.data.error)
      ? e.data.error
      : undefined;
  if (body) {
    if (isObj(body.error)) add(body.error.type); // Anthropic: { type: "error", error: { type } }
    add(body.code);
    add(body.type);
    add(body.status); // Gemini: { code: 429, status: "RESOURCE_EXHAUSTED" }
  }
  add(e.code);
  add(e.type);
  return out;
}

function messagesOf(e: Obj): string[] {
  const out = [e.message];
  if (isObj(e.error))
    out.push(e.error.message, isObj(e.error.error) ? e.error.error.message : undefined);
  return out.filter((m): m is string => typeof m === "string");
}

/** Gemini's google.rpc.RetryInfo: `{ "@type": ".../RetryInfo", retryDelay: "30s" }`. */
function retryInfoMs(e: Obj): number | undefined {
  const body = isObj(e.error) ? e.error : undefined;
  const details = body && Array.isArray(body.details) ? body.details : undefined;
  for (const d of details ?? []) {
    if (!isObj(d) || !String(d["@type"] ?? "").endsWith("RetryInfo")) continue;
    const m = /^(\d+(?:\.\d+)?)s$/.exec(String(d.retryDelay ?? ""));
    if (m) return parseRetryAfterValue(m[1]!, 0);
  }
  return undefined;
}

function chainOf(error: unknown): Obj[] {
  const chain: Obj[] = [];
  const seen = new Set<unknown>();
  for (let e = error; isObj(e) && !seen.has(e) && chain.length < 16; e = e.cause) {
    seen.add(e);
    chain.push(e);
  }
  return chain;
}

function make(kind: FailureKind, extra: Omit<Failure, "kind" | "retryable"> = {}): Failure {
  const f: { -readonly [K in keyof Failure]: Failure[K] } = {
    kind,
    retryable: RETRYABLE_KINDS.has(kind),
  };
  if (extra.status !== undefined) f.status = extra.status;
  if (extra.code !== undefined) f.code = extra.code;
  if (extra.retryAfterMs !== undefined) f.retryAfterMs = extra.retryAfterMs;
  return f;
}

function kindOfStatus(status: number): FailureKind {
  if (status === 429) return "rate_limited";
  if (status === 503 || status === 529) return "overloaded";
  if (status === 408 || status === 504) return "timeout";
  if (status >= 500) return "server_error";
  if (status === 401 || status === 403) return "auth";
  if (status === 404) return "not_found";
  return "invalid_request";
}

/**
 * Classifies any error, walking its `cause` chain, in the order of DESIGN rule 3:
 * cancellation, our own timeouts, transport, the provider's code, the HTTP status,
 * and otherwise `unknown` (not retried: bugs stay loud).
 */
export function classify(error: unknown, nowMs: number = Date.now()): Failure {
  const chain = chainOf(error);
  if (chain.some((e) => CANCEL_NAMES.has(String(e.name)))) return make("cancelled");
  const timeout = chain.find((e) => TIMEOUT_NAMES.has(String(e.name)));
  if (timeout) return make("timeout", { code: str(timeout.code) });

  for (const e of chain) {
    const code = str(e.code) ?? str(e.errno);
    const kind = code === undefined ? undefined : NETWORK_CODES.get(code);
    if (kind !== undefined) return make(kind, { code });
  }
  if (chain.some((e) => TRANSPORT_NAMES.has(String(e.name)) && statusOf(e) === undefined)) {
    return make("transport");
  }

  for (const e of chain) {
    const status = statusOf(e);
    const codes = codesOf(e);
    if (status === undefined && codes.length === 0) continue;
    const headers = headersOf(e);
    const retryAfterMs = parseRetryAfter(headers as never, nowMs) ?? retryInfoMs(e);
    let kind: FailureKind | undefined;
    let code: string | undefined;
    for (const c of codes) {
      kind = PROVIDER_CODES.get(c.toLowerCase());
      if (kind !== undefined) {
        code = c;
        break;
      }
    }
    if (kind === undefined || kind === "invalid_request") {
      if (
        messagesOf(e).some((m) => CONTEXT_MESSAGE.test(m)) &&
        (status === 400 || status === 413 || kind)
      ) {
        kind = "context_exceeded";
      }
    }
    if (kind === undefined && status !== undefined) kind = kindOfStatus(status);
    if (kind === undefined) continue; // an unrecognised code with no status: look deeper
    code ??= codes[0];
    const failure = make(kind, { status, code, retryAfterMs });
    return applyShouldRetry(failure, readHeader(headers, "x-should-retry"));
  }
  return make("unknown");
}

const NEVER_RETRY: ReadonlySet<FailureKind> = new Set([
  "quota_exhausted",
  "context_exceeded",
  "auth",
  "cancelled",
  "content_filtered",
]);

/** `x-should-retry` (OpenAI, Anthropic): the server's explicit word, within our rules. */
function applyShouldRetry(f: Failure, header: string | undefined): Failure {
  if (header === "false") return { ...f, retryable: false };
  if (header === "true" && !NEVER_RETRY.has(f.kind)) return { ...f, retryable: true };
  return f;
}
