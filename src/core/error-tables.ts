import type { FailureKind } from "./failure.ts";

/**
 * What a provider's code means. `specific` codes name a condition (a quota, a context
 * window, an overload); `generic` ones only restate the status class
 * (`invalid_request_error` on a 429, `api_error` on a 404) and count only when there is no
 * status to read. See the precedence in docs/architecture.md, rule 3.
 */
export interface CodeMeaning {
  readonly kind: FailureKind;
  readonly generic: boolean;
}

const meanings = (
  generic: boolean,
  entries: Record<string, FailureKind>,
): [string, CodeMeaning][] =>
  Object.entries(entries).map(([code, kind]) => [code.toLowerCase(), { kind, generic }]);

/**
 * Provider codes, AWS exception names and Google reasons, lower-cased: OpenAI
 * `code`/`type`, Anthropic `error.type`, Gemini `error.status` and `ErrorInfo.reason`,
 * Bedrock's exception names, the OpenAI-compatible servers' own. A Map, so "constructor"
 * or "toString" mean nothing.
 */
export const CODES: ReadonlyMap<string, CodeMeaning> = new Map([
  ...meanings(false, {
    insufficient_quota: "quota_exhausted",
    billing_error: "quota_exhausted",
    billing_hard_limit_reached: "quota_exhausted",
    quota_exceeded: "quota_exhausted",
    ServiceQuotaExceededException: "quota_exhausted",
    context_length_exceeded: "context_exceeded",
    string_above_max_length: "context_exceeded",
    request_too_large: "invalid_request", // a byte-size limit, not the context window
    invalid_api_key: "auth",
    API_KEY_INVALID: "auth",
    authentication_error: "auth",
    permission_error: "auth",
    permission_denied: "auth",
    unauthenticated: "auth",
    unauthorized: "auth",
    AccessDeniedException: "auth",
    not_found_error: "not_found",
    model_not_found: "not_found",
    not_found: "not_found",
    DeploymentNotFound: "not_found",
    ResourceNotFoundException: "not_found",
    model_not_available: "not_found",
    dedicated_endpoint_not_running: "not_found",
    content_filter: "content_filtered",
    content_policy_violation: "content_filtered",
    rate_limit_exceeded: "rate_limited",
    rate_limit_error: "rate_limited",
    rate_limited: "rate_limited",
    resource_exhausted: "rate_limited",
    ThrottlingException: "rate_limited",
    overloaded_error: "overloaded",
    server_is_overloaded: "overloaded",
    unavailable: "overloaded",
    slow_down: "overloaded",
    ServiceUnavailableException: "overloaded",
    ModelNotReadyException: "overloaded",
    deadline_exceeded: "timeout",
    timeout_error: "timeout",
    ModelTimeoutException: "timeout",
    // breakwater's own: a stream event that is not JSON, a body that ended before its answer.
    malformed_event: "server_error",
    stream_unfinished: "server_error",
  }),
  ...meanings(true, {
    invalid_request_error: "invalid_request",
    invalid_argument: "invalid_request",
    failed_precondition: "invalid_request",
    bad_request: "invalid_request",
    BadRequestError: "invalid_request",
    ValidationException: "invalid_request",
    NotFoundError: "not_found",
    api_error: "server_error",
    server_error: "server_error",
    internal: "server_error",
    internal_error: "server_error",
    InternalServerException: "server_error",
    ModelStreamErrorException: "server_error",
  }),
]);

/** Node, undici and HTTP/2 network codes: the connection failed, nothing was answered. */
export const NETWORK_CODES: ReadonlyMap<string, FailureKind> = new Map(
  Object.entries({
    ECONNRESET: "transport",
    ECONNREFUSED: "transport",
    ECONNABORTED: "transport",
    EPIPE: "transport",
    ENOTFOUND: "transport",
    EAI_AGAIN: "transport",
    EHOSTUNREACH: "transport",
    ENETUNREACH: "transport",
    ENETDOWN: "transport",
    UND_ERR_SOCKET: "transport",
    UND_ERR_CLOSED: "transport",
    // A body cut short under `Connection: close`: fewer bytes than its Content-Length.
    UND_ERR_RES_CONTENT_LENGTH_MISMATCH: "transport",
    ERR_STREAM_PREMATURE_CLOSE: "transport",
    ERR_HTTP2_STREAM_ERROR: "transport",
    ERR_HTTP2_GOAWAY_SESSION: "transport",
    ERR_HTTP2_SESSION_ERROR: "transport",
    ERR_HTTP2_STREAM_CANCEL: "transport",
    ERR_HTTP2_INVALID_SESSION: "transport",
    ETIMEDOUT: "timeout",
    UND_ERR_CONNECT_TIMEOUT: "timeout",
    UND_ERR_HEADERS_TIMEOUT: "timeout",
    UND_ERR_BODY_TIMEOUT: "timeout",
  } satisfies Record<string, FailureKind>),
);

/** TLS and certificate failures: configuration, not weather. Another attempt meets the same
 * certificate, so they stay `unknown` (loud), even inside an SDK's connection error. */
export const TLS_CODE = /^(?:ERR_TLS_|ERR_SSL_|EPROTO$|CERT_|DEPTH_ZERO_|SELF_SIGNED_|UNABLE_TO_)/;

/**
 * SDK error classes that carry no status, by class name (read along the prototype chain,
 * since the openai and anthropic SDKs leave `.name` as "Error"): openai/anthropic
 * (Stainless), Mistral (Speakeasy), AWS (smithy), DOM (`AbortSignal.timeout`).
 */
export const CLASS_KINDS: ReadonlyMap<string, FailureKind> = new Map(
  Object.entries({
    AbortError: "cancelled",
    APIUserAbortError: "cancelled",
    RequestAbortedError: "cancelled",
    TimeoutError: "timeout",
    APIConnectionTimeoutError: "timeout",
    RequestTimeoutError: "timeout",
    APIConnectionError: "transport",
    ConnectionError: "transport",
    FetchError: "transport",
    // undici: a response the wire broke (a chunked body cut mid-chunk under `Connection:
    // close`), or fewer bytes than its Content-Length.
    HTTPParserError: "transport",
    ResponseContentLengthMismatchError: "transport",
  } satisfies Record<string, FailureKind>),
);

/** Where a wording rule may speak. */
export type WordingScope =
  /** Any 4xx (429 too) or no status: it names a limit that no wait lifts. */
  | "limit"
  /** A 4xx other than 408/429, or no status and no transient code. */
  | "client"
  /** A transient status (429, 5xx) or none: it refines a retry, never starts one. */
  | "transient";

export interface Wording {
  readonly kind: FailureKind;
  readonly scope: WordingScope;
  readonly test: (text: string) => boolean;
}

const re = (r: RegExp) => (text: string) => r.test(text);

/** "Limit 6000, Used 0, Requested 12903": one request larger than the whole window. */
function requestedOverLimit(text: string): boolean {
  const m = /\bLimit:? ([\d,]+),(?: Used [\d,]+,)? Requested:? ~?([\d,]+)/i.exec(text);
  return m !== null && Number(m[2]!.replaceAll(",", "")) > Number(m[1]!.replaceAll(",", ""));
}

/**
 * Provider wording for conditions that arrive under a code or status that says otherwise.
 * Each rule is anchored in a real response (test/core/corpus): Anthropic's "credit balance
 * is too low" (400), xAI's credits (403, 429), OpenRouter's "free-models-per-day" (429),
 * Gemini's per-day `quotaId`, Groq's and OpenAI's "Request too large" (413, 429), Mistral's
 * "capacity exceeded" (429).
 */
export const WORDING: readonly Wording[] = [
  {
    kind: "quota_exhausted",
    scope: "limit",
    test: re(
      /credit balance|(?:more|any|available|purchase|buy) credits|insufficient (?:balance|credits|funds)|maximum billing|billing (?:hard )?limit|spend(?:ing)? limit|extra usage is required|regain access on|per[-_ ]?day\b|PerDay/i,
    ),
  },
  { kind: "invalid_request", scope: "limit", test: re(/\brequest too large\b/i) },
  { kind: "invalid_request", scope: "limit", test: requestedOverLimit },
  {
    kind: "context_exceeded",
    scope: "client",
    test: re(
      /prompt is too long|input is too long|context length|context window|maximum context|maximum prompt length|too many tokens|exceeds the maximum number of tokens|input token count/i,
    ),
  },
  {
    kind: "auth",
    scope: "client",
    test: re(
      /(?:incorrect|invalid) api key|api key (?:not valid|not found)|invalid x-api-key|organization has been disabled|not allowed to use publisher model/i,
    ),
  },
  {
    kind: "overloaded",
    scope: "transient",
    test: re(/overloaded|capacity exceeded|at capacity|over capacity/i),
  },
];
