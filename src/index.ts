/**
 * The core: a policy that owns retry for any async call, runs, tools, chains and the
 * failure classifier. No dependencies.
 *
 * @example
 * ```ts
 * import { policy, reasonOf, Run, throwIfNotOk } from "breakwater";
 *
 * const p = policy(); // 3 attempts, full jitter, Retry-After capped at 30 s, adaptive admission
 * const run = new Run({ deadlineMs: 60_000 }); // one deadline for a whole agent run
 * try {
 *   const res = await p.execute(
 *     ({ signal }) =>
 *       fetch(`${process.env.OPENAI_BASE_URL}/chat/completions`, {
 *         method: "POST",
 *         headers: { "content-type": "application/json" },
 *         body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] }),
 *         signal,
 *       }).then(throwIfNotOk),
 *     { run },
 *   );
 *   console.log((await res.json()).choices[0].message.content);
 * } catch (error) {
 *   console.log("gave up:", reasonOf(error));
 * }
 * ```
 * @module breakwater
 */
export {
  type AuditClients,
  type AuditLayer,
  type AuditReport,
  audit,
  type LayerSpec,
} from "./audit/audit.ts";
export { AdaptiveAdmission, type AdaptiveAdmissionOptions } from "./core/admission.ts";
export {
  type Backoff,
  type BackoffOptions,
  backoff,
  type ExponentialBackoff,
  type Jitter,
} from "./core/backoff.ts";
export {
  type Breaker,
  type BreakerSnapshot,
  type BreakerState,
  CircuitBreaker,
  type CircuitBreakerOptions,
} from "./core/breaker.ts";
export {
  type Admission,
  type AdmissionAsk,
  RetryBudget,
  type RetryBudgetOptions,
} from "./core/budget.ts";
export { classify } from "./core/classify.ts";
export {
  backgroundClock,
  type Cancel,
  type Clock,
  systemClock,
  VirtualClock,
  type VirtualClockOptions,
} from "./core/clock.ts";
export type { TimeoutCause } from "./core/deadline.ts";
export {
  AttemptTimeoutError,
  BreakwaterError,
  failureOf,
  type GiveUpReason,
  isBreakwaterError,
  ledgerOf,
  OutputError,
  type OutputIssue,
  type OutputProblem,
  type PartialAnswer,
  type PartialResult,
  type PartialToolCall,
  partialOf,
  RequestCheckError,
  reasonOf,
} from "./core/errors.ts";
export { type Failure, type FailureKind, isUpstreamKind } from "./core/failure.ts";
export { type Handoff, handoff } from "./core/handoff.ts";
export type { HeaderBag } from "./core/headers.ts";
export type { HedgeOptions } from "./core/hedge.ts";
export { type AttemptRecord, Ledger } from "./core/ledger.ts";
export {
  type AcquireOptions,
  type Cost,
  isLimiter,
  type Limiter,
  type Permit,
  RateLimiter,
  type RateLimiterOptions,
  type RateLimits,
  RateLimitWaitError,
  type Spend,
} from "./core/limiter.ts";
export {
  type OutputCheck,
  type OutputOptions,
  type StandardSchema,
  TRUNCATED_FINISH,
} from "./core/output.ts";
export { type LimitState, parseRateLimitHeaders, type RateLimitState } from "./core/ratelimit.ts";
export { redact } from "./core/redact.ts";
export { MAX_DELAY_MS, parseHttpDate, parseRetryAfter } from "./core/retry-after.ts";
export type { Price, Usage } from "./core/usage.ts";
export { ConfigError } from "./core/validate.ts";
export { HttpError, throwIfNotOk } from "./http/http-error.ts";
export type { AttemptContext, CallOptions } from "./policy/call.ts";
export {
  type DurableStepOptions,
  durableStep,
  type StepContext,
  type StepOutcome,
  type StepState,
} from "./policy/durable-step.ts";
export type { ExecuteOptions } from "./policy/execute.ts";
export {
  type ChainCallOptions,
  type Fallback,
  type FallbackOptions,
  fallback,
  movesOn,
  type Upstream,
} from "./policy/fallback.ts";
export type {
  AttemptWatch,
  CallEnd,
  CallInfo,
  CallWatch,
  Observer,
  WaitCause,
} from "./policy/observer.ts";
export type {
  GiveUpEvent,
  PolicyOptions,
  RetryEvent,
  SuccessEvent,
  WaitEvent,
} from "./policy/options.ts";
export { type Operation, type Policy, policy } from "./policy/policy.ts";
export { type Pool, type PoolOptions, pool } from "./policy/pool.ts";
export {
  type ContinueFrom,
  type DiscardInfo,
  GuardedStream,
  guardedStream,
  type OpenStream,
  type StreamMode,
  type StreamOptions,
  type StreamOutcome,
} from "./policy/stream.ts";
export {
  type Holder,
  type Journal,
  JournalDivergenceError,
  JournalError,
  type Lease,
  MemoryJournal,
  RunClaimedError,
  type StepRecord,
} from "./run/journal.ts";
export { type RequestKey, RUN_STAMPS } from "./run/request-key.ts";
export { Run, type RunOptions, type RunStats } from "./run/run.ts";
export * from "./tools/index.ts";
