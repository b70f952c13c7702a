/** What went wrong, in the words every part of breakwater agrees on. */
export type FailureKind =
  | "rate_limited"
  | "overloaded"
  | "server_error"
  | "timeout"
  | "transport"
  | "quota_exhausted"
  | "context_exceeded"
  | "invalid_request"
  | "auth"
  | "not_found"
  | "content_filtered"
  | "truncated"
  | "invalid_output"
  | "cancelled"
  | "unknown";

/** How an attempt failed: its kind, whether it may be retried, and what the server said. */
export interface Failure {
  readonly kind: FailureKind;
  readonly retryable: boolean;
  readonly status?: number;
  /** The provider's own code (or the Node network code) that decided the kind. */
  readonly code?: string;
  /** The server's wait hint, already parsed (retry-after-ms, Retry-After, RetryInfo). */
  readonly retryAfterMs?: number;
}

interface KindFacts {
  /** Transient: another attempt may succeed (docs/architecture.md, rule 3). */
  readonly retryable: boolean;
  /** Says the upstream itself is unhealthy: what a breaker and an admission count. */
  readonly upstream: boolean;
  /** Never retried, whatever a server's `x-should-retry: true` says. */
  readonly final: boolean;
}

/** The one table of what each kind means. Every other list of kinds derives from it. */
export const KINDS: Readonly<Record<FailureKind, KindFacts>> = {
  rate_limited: { retryable: true, upstream: true, final: false },
  overloaded: { retryable: true, upstream: true, final: false },
  server_error: { retryable: true, upstream: true, final: false },
  timeout: { retryable: true, upstream: true, final: false },
  transport: { retryable: true, upstream: true, final: false },
  quota_exhausted: { retryable: false, upstream: false, final: true },
  context_exceeded: { retryable: false, upstream: false, final: true },
  invalid_request: { retryable: false, upstream: false, final: false },
  auth: { retryable: false, upstream: false, final: true },
  not_found: { retryable: false, upstream: false, final: false },
  content_filtered: { retryable: false, upstream: false, final: true },
  // The answer, not the request: the upstream answered (the breaker hears no failure). A
  // truncated answer is cut the same way again at the same limit; an invalid one may not be.
  truncated: { retryable: false, upstream: false, final: true },
  invalid_output: { retryable: true, upstream: false, final: false },
  cancelled: { retryable: false, upstream: false, final: true },
  unknown: { retryable: false, upstream: false, final: false },
};

export const FAILURE_KINDS = Object.keys(KINDS) as readonly FailureKind[];

/** The kinds that judge an answer the provider gave, not the request (rule 11). */
/** Whether a failure of this kind says the upstream itself is unhealthy (what breakers and
 * admissions count). */
export const isUpstreamKind = (kind: FailureKind): boolean => KINDS[kind]?.upstream === true;

export const isOutputKind = (kind: FailureKind): boolean =>
  kind === "truncated" || kind === "invalid_output";

/** A failure of `kind`, retryable as the table says, with the extras that are defined. */
export function failure(
  kind: FailureKind,
  extra: Omit<Failure, "kind" | "retryable"> = {},
): Failure {
  const f: { -readonly [K in keyof Failure]: Failure[K] } = {
    kind,
    retryable: KINDS[kind].retryable,
  };
  if (extra.status !== undefined) f.status = extra.status;
  if (extra.code !== undefined) f.code = extra.code;
  if (extra.retryAfterMs !== undefined) f.retryAfterMs = extra.retryAfterMs;
  return f;
}
