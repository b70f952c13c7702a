import { AttemptTimeoutError } from "./errors.ts";
import { type Failure, type FailureKind, failure, KINDS } from "./failure.ts";
import { readHeader } from "./headers.ts";
import { parseRetryAfter, parseRetryAfterValue } from "./retry-after.ts";
import { get, getStr, isA, isArray, isObj, type Obj, str } from "./safe.ts";

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
const TIMEOUT_NAMES = new Set(["TimeoutError", "APIConnectionTimeoutError"]);
const CANCEL_NAMES = new Set(["AbortError", "APIUserAbortError"]);

/** Context-length errors that arrive with a generic code (Anthropic, Gemini, older OpenAI). */
const CONTEXT_MESSAGE =
  /prompt is too long|context length|context window|maximum context|too many tokens|exceeds the maximum number of tokens/i;

const nameOf = (e: Obj): string => getStr(e, "name") ?? "";

function statusOf(e: Obj): number | undefined {
  const resp = get(e, "response");
  for (const v of [get(e, "status"), get(e, "statusCode"), get(resp, "status")]) {
    const n = typeof v === "string" ? Number(v) : v;
    if (typeof n === "number" && Number.isInteger(n) && n >= 100 && n <= 599) return n;
  }
  return undefined;
}

function headersOf(e: Obj): unknown {
  return get(e, "headers") ?? get(e, "responseHeaders") ?? get(get(e, "response"), "headers");
}

/** Candidate provider codes, most specific first. */
function codesOf(e: Obj): string[] {
  const out: string[] = [];
  const add = (v: unknown) => {
    const s = str(v);
    if (s !== undefined && s !== "error") out.push(s);
  };
  const error = get(e, "error");
  const body = isObj(error) ? error : get(get(e, "data"), "error");
  if (isObj(body)) {
    add(get(get(body, "error"), "type")); // Anthropic: { type: "error", error: { type } }
    add(get(body, "code"));
    add(get(body, "type"));
    add(get(body, "status")); // Gemini: { code: 429, status: "RESOURCE_EXHAUSTED" }
  }
  add(get(e, "code"));
  add(get(e, "type"));
  return out;
}

function messagesOf(e: Obj): string[] {
  const error = get(e, "error");
  const out = [get(e, "message"), get(error, "message"), get(get(error, "error"), "message")];
  return out.filter((m): m is string => typeof m === "string");
}

/** Gemini's google.rpc.RetryInfo: `{ "@type": ".../RetryInfo", retryDelay: "30s" }`. */
function retryInfoMs(e: Obj): number | undefined {
  const details = get(get(e, "error"), "details");
  if (!isArray(details)) return undefined;
  for (const d of details.slice(0, 32)) {
    if (!getStr(d, "@type")?.endsWith("RetryInfo")) continue;
    const m = /^(\d+(?:\.\d+)?)s$/.exec(getStr(d, "retryDelay") ?? "");
    if (m) return parseRetryAfterValue(m[1]!, 0);
  }
  return undefined;
}

function chainOf(error: unknown): Obj[] {
  const chain: Obj[] = [];
  const seen = new Set<unknown>();
  for (let e = error; isObj(e) && !seen.has(e) && chain.length < 16; e = get(e, "cause")) {
    seen.add(e);
    chain.push(e);
  }
  return chain;
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

/** Cancellation, our own timeouts and transport failures: they decide before any status. */
function connectionFailure(chain: Obj[]): Failure | undefined {
  if (chain.some((e) => CANCEL_NAMES.has(nameOf(e)))) return failure("cancelled");
  const timeout = chain.find((e) => isA(e, AttemptTimeoutError) || TIMEOUT_NAMES.has(nameOf(e)));
  if (timeout) return failure("timeout", { code: getStr(timeout, "code") });
  for (const e of chain) {
    const code = getStr(e, "code") ?? getStr(e, "errno");
    const kind = code === undefined ? undefined : NETWORK_CODES.get(code);
    if (kind !== undefined) return failure(kind, { code });
  }
  if (chain.some((e) => TRANSPORT_NAMES.has(nameOf(e)) && statusOf(e) === undefined))
    return failure("transport");
  return undefined;
}

/** The first recognised provider code, and the kind it means. */
function knownCode(codes: string[]): { kind?: FailureKind; code?: string } {
  for (const c of codes) {
    const kind = PROVIDER_CODES.get(c.toLowerCase());
    if (kind !== undefined) return { kind, code: c };
  }
  return {};
}

/** One error of the chain read as an HTTP answer: its provider code, then its status. */
function answerFailure(e: Obj, nowMs: number): Failure | undefined {
  const status = statusOf(e);
  const codes = codesOf(e);
  if (status === undefined && codes.length === 0) return undefined;
  let { kind, code } = knownCode(codes);
  if (
    (kind === undefined || kind === "invalid_request") &&
    messagesOf(e).some((m) => CONTEXT_MESSAGE.test(m)) &&
    (status === 400 || status === 413 || kind)
  )
    kind = "context_exceeded";
  if (kind === undefined && status !== undefined) kind = kindOfStatus(status);
  if (kind === undefined) return undefined; // an unrecognised code with no status: look deeper
  const headers = headersOf(e);
  const retryAfterMs = parseRetryAfter(headers as never, nowMs) ?? retryInfoMs(e);
  const f = failure(kind, { status, code: code ?? codes[0], retryAfterMs });
  return applyShouldRetry(f, readHeader(headers, "x-should-retry"));
}

/**
 * Classifies any error, walking its `cause` chain, in the order of docs/architecture.md
 * rule 3: cancellation, our own timeouts, transport, the provider's code, the HTTP status,
 * and otherwise `unknown` (not retried: bugs stay loud).
 */
export function classify(error: unknown, nowMs: number = Date.now()): Failure {
  try {
    return classifyChain(chainOf(error), nowMs);
  } catch {
    return failure("unknown"); // the readers are total; this is the last line, not the plan
  }
}

function classifyChain(chain: Obj[], nowMs: number): Failure {
  const early = connectionFailure(chain);
  if (early !== undefined) return early;
  for (const e of chain) {
    const f = answerFailure(e, nowMs);
    if (f !== undefined) return f;
  }
  return failure("unknown");
}

/** `x-should-retry` (OpenAI, Anthropic): the server's explicit word, within our rules. */
function applyShouldRetry(f: Failure, header: string | undefined): Failure {
  if (header === "false") return { ...f, retryable: false };
  if (header === "true" && !KINDS[f.kind].final) return { ...f, retryable: true };
  return f;
}
