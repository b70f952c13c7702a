export { type Backoff, type BackoffOptions, backoff, type Jitter } from "./core/backoff.ts";
export { type BreakerState, CircuitBreaker, type CircuitBreakerOptions } from "./core/breaker.ts";
export { RetryBudget, type RetryBudgetOptions } from "./core/budget.ts";
export { classify } from "./core/classify.ts";
export { type Cancel, type Clock, systemClock, VirtualClock } from "./core/clock.ts";
export {
  BreakwaterError,
  failureOf,
  type GiveUpReason,
  isBreakwaterError,
  ledgerOf,
  type PartialResult,
  reasonOf,
} from "./core/errors.ts";
export type { Failure, FailureKind } from "./core/failure.ts";
export { type HeaderBag, readHeader } from "./core/headers.ts";
export { type AttemptRecord, Ledger } from "./core/ledger.ts";
export { redact } from "./core/redact.ts";
export { MAX_DELAY_MS, parseHttpDate, parseRetryAfter } from "./core/retry-after.ts";
export type { Price, Usage } from "./core/usage.ts";
export { ConfigError } from "./core/validate.ts";
export { HttpError, throwIfNotOk } from "./http/http-error.ts";
export { AttemptTimeoutError } from "./policy/attempt-scope.ts";
export type { AttemptContext, CallOptions } from "./policy/call.ts";
export type { ExecuteOptions } from "./policy/execute.ts";
export type { GiveUpEvent, PolicyOptions, RetryEvent, SuccessEvent } from "./policy/options.ts";
export { type Policy, policy } from "./policy/policy.ts";
export {
  type DiscardInfo,
  GuardedStream,
  guardedStream,
  type OpenStream,
  type StreamMode,
  type StreamOptions,
  type StreamOutcome,
} from "./policy/stream.ts";
export {
  type AuditClients,
  type AuditLayer,
  type AuditReport,
  audit,
  type LayerSpec,
} from "./providers/audit.ts";
export { type Journal, MemoryJournal, type StepRecord } from "./run/journal.ts";
export { Run, type RunOptions, type RunStats } from "./run/run.ts";
export * from "./tools/index.ts";
