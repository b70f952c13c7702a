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
  | "cancelled"
  | "unknown";

export interface Failure {
  readonly kind: FailureKind;
  readonly retryable: boolean;
  readonly status?: number;
  /** The provider's own code (or the Node network code) that decided the kind. */
  readonly code?: string;
  /** The server's wait hint, already parsed (retry-after-ms, Retry-After, RetryInfo). */
  readonly retryAfterMs?: number;
}

/** Kinds that say the upstream is unhealthy: what a breaker counts. */
export const UPSTREAM_KINDS: ReadonlySet<FailureKind> = new Set([
  "rate_limited",
  "overloaded",
  "server_error",
  "timeout",
  "transport",
]);

export const RETRYABLE_KINDS: ReadonlySet<FailureKind> = UPSTREAM_KINDS;
