import { type Backoff, type BackoffOptions, backoff as makeBackoff } from "../core/backoff.ts";
import { CircuitBreaker, type CircuitBreakerOptions } from "../core/breaker.ts";
import { RetryBudget, type RetryBudgetOptions } from "../core/budget.ts";
import { type Clock, systemClock } from "../core/clock.ts";
import type { GiveUpReason } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import type { Ledger } from "../core/ledger.ts";
import { MAX_DELAY_MS } from "../core/retry-after.ts";
import type { Price, Usage } from "../core/usage.ts";
import { validator } from "../core/validate.ts";

export interface RetryEvent {
  /** The attempt that just failed (1 for the first). */
  readonly attempt: number;
  readonly error: unknown;
  readonly failure: Failure;
  /** How long the policy is about to wait. */
  readonly delayMs: number;
  readonly ledger: Ledger;
}

export interface GiveUpEvent {
  readonly reason: GiveUpReason;
  readonly error: unknown;
  readonly failure: Failure | undefined;
  readonly ledger: Ledger;
}

export interface SuccessEvent {
  readonly attempts: number;
  readonly ledger: Ledger;
}

export interface PolicyOptions {
  /** Attempts per logical call, including the first. Default 3. */
  maxAttempts?: number;
  backoff?: BackoffOptions | Backoff;
  /** Retry-After is honoured up to `maxMs` (default 30 000); beyond it the call gives up
   * at once with reason `retry-after-too-long`. `jitterMs` (default 1 000) caps the small
   * random extra added on top so clients told the same value do not return together. */
  retryAfter?: { maxMs?: number; jitterMs?: number };
  /** Each attempt's own timeout. Default: none. */
  attemptTimeoutMs?: number;
  /** The logical call's deadline, set when it starts. Default: none. */
  deadlineMs?: number;
  /** Streams: time from the attempt's start to the first content chunk. Default: none. */
  firstTokenTimeoutMs?: number;
  /** Streams: the longest gap between chunks once content flows. Default: none. */
  idleTimeoutMs?: number;
  /** Streams: a cap on one attempt's whole duration. Default: none. */
  totalTimeoutMs?: number;
  /** Shared per upstream. Options make a budget shared by every call of this policy. */
  budget?: RetryBudget | RetryBudgetOptions;
  /** Shared per upstream. Options make a breaker shared by every call of this policy. */
  breaker?: CircuitBreaker | CircuitBreakerOptions;
  clock?: Clock;
  /** [0, 1) source for jitter; inject for tests. Default Math.random. */
  random?: () => number;
  /** Runs before the built-in classifier; return undefined to fall through to it. */
  classify?: (error: unknown, nowMs: number) => Failure | undefined;
  /** The model name for the ledger and pricing. */
  model?: string;
  /** Prices per model (per million input and output tokens). */
  prices?: Readonly<Record<string, Price>>;
  /** Reads token usage from a result (execute) or chunk (stream). */
  usage?: (value: unknown) => Partial<Usage> | undefined;
  /** Called before each retry; return false to veto it. */
  onRetry?: (event: RetryEvent) => unknown;
  onGiveUp?: (event: GiveUpEvent) => void;
  onSuccess?: (event: SuccessEvent) => void;
}

export interface ResolvedOptions {
  readonly maxAttempts: number;
  readonly backoff: Backoff;
  readonly retryAfterMaxMs: number;
  readonly retryAfterJitterMs: number;
  readonly attemptTimeoutMs: number;
  readonly deadlineMs: number;
  readonly firstTokenTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly totalTimeoutMs: number;
  readonly budget: RetryBudget | undefined;
  readonly breaker: CircuitBreaker | undefined;
  readonly clock: Clock;
  readonly random: () => number;
  readonly classify: ((error: unknown, nowMs: number) => Failure | undefined) | undefined;
  readonly model: string | undefined;
  readonly price: Price | undefined;
  readonly usage: ((value: unknown) => Partial<Usage> | undefined) | undefined;
  readonly onRetry: PolicyOptions["onRetry"];
  readonly onGiveUp: PolicyOptions["onGiveUp"];
  readonly onSuccess: PolicyOptions["onSuccess"];
}

const KEYS = [
  "maxAttempts",
  "backoff",
  "retryAfter",
  "attemptTimeoutMs",
  "deadlineMs",
  "firstTokenTimeoutMs",
  "idleTimeoutMs",
  "totalTimeoutMs",
  "budget",
  "breaker",
  "clock",
  "random",
  "classify",
  "model",
  "prices",
  "usage",
  "onRetry",
  "onGiveUp",
  "onSuccess",
] as const;

const isBackoff = (b: unknown): b is Backoff =>
  typeof (b as Backoff | undefined)?.delay === "function";

/** Validates every option at construction: a bad one throws naming option, value and rule. */
export function resolveOptions(options: PolicyOptions): ResolvedOptions {
  const v = validator("policy");
  const o = v.object("options", options);
  v.known("", o, KEYS);
  const fnOrUndef = <T>(name: string, x: unknown): T | undefined =>
    x === undefined ? undefined : v.fn<T>(name, x);
  const retryAfter = o.retryAfter === undefined ? {} : v.object("retryAfter", o.retryAfter);
  v.known("retryAfter", retryAfter, ["maxMs", "jitterMs"]);
  const clock = (o.clock ?? systemClock) as Clock;
  if (
    typeof clock.now !== "function" ||
    typeof clock.sleep !== "function" ||
    typeof clock.schedule !== "function"
  ) {
    v.fail(
      "clock",
      o.clock,
      "a Clock (now, sleep, schedule), e.g. systemClock or new VirtualClock()",
    );
  }
  const prices = o.prices === undefined ? {} : v.object("prices", o.prices);
  for (const [model, p] of Object.entries(prices)) {
    const price = v.object(`prices.${model}`, p);
    v.num(`prices.${model}.inputPerMillion`, price.inputPerMillion, 0);
    v.num(`prices.${model}.outputPerMillion`, price.outputPerMillion, 0);
  }
  if (o.model !== undefined && (typeof o.model !== "string" || o.model === ""))
    v.fail("model", o.model, "a non-empty string");
  const model = o.model as string | undefined;
  const optionalMs = (name: string, x: unknown) =>
    x === undefined ? Number.POSITIVE_INFINITY : Math.min(v.ms(name, x), MAX_DELAY_MS);

  let budget: RetryBudget | undefined;
  if (o.budget instanceof RetryBudget) budget = o.budget;
  else if (o.budget !== undefined) budget = new RetryBudget(v.object("budget", o.budget));
  let breaker: CircuitBreaker | undefined;
  if (o.breaker instanceof CircuitBreaker) breaker = o.breaker;
  else if (o.breaker !== undefined)
    breaker = new CircuitBreaker({ clock, ...v.object("breaker", o.breaker) });

  return Object.freeze({
    maxAttempts: v.int("maxAttempts", o.maxAttempts ?? 3, 1, true),
    backoff: isBackoff(o.backoff) ? o.backoff : makeBackoff((o.backoff ?? {}) as BackoffOptions),
    retryAfterMaxMs:
      retryAfter.maxMs === undefined
        ? 30_000
        : v.num("retryAfter.maxMs", retryAfter.maxMs, 0, MAX_DELAY_MS),
    retryAfterJitterMs:
      retryAfter.jitterMs === undefined
        ? 1_000
        : v.num("retryAfter.jitterMs", retryAfter.jitterMs, 0, MAX_DELAY_MS),
    attemptTimeoutMs: optionalMs("attemptTimeoutMs", o.attemptTimeoutMs),
    deadlineMs: optionalMs("deadlineMs", o.deadlineMs),
    firstTokenTimeoutMs: optionalMs("firstTokenTimeoutMs", o.firstTokenTimeoutMs),
    idleTimeoutMs: optionalMs("idleTimeoutMs", o.idleTimeoutMs),
    totalTimeoutMs: optionalMs("totalTimeoutMs", o.totalTimeoutMs),
    budget,
    breaker,
    clock,
    random: (o.random === undefined ? Math.random : v.fn("random", o.random)) as () => number,
    classify: fnOrUndef<ResolvedOptions["classify"]>("classify", o.classify),
    model,
    price:
      model === undefined || !Object.hasOwn(prices, model) ? undefined : (prices[model] as Price),
    usage: fnOrUndef<ResolvedOptions["usage"]>("usage", o.usage),
    onRetry: fnOrUndef<ResolvedOptions["onRetry"]>("onRetry", o.onRetry),
    onGiveUp: fnOrUndef<ResolvedOptions["onGiveUp"]>("onGiveUp", o.onGiveUp),
    onSuccess: fnOrUndef<ResolvedOptions["onSuccess"]>("onSuccess", o.onSuccess),
  });
}
