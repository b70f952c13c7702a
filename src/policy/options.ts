import { AdaptiveAdmission } from "../core/admission.ts";
import { type Backoff, type BackoffOptions, isBackoff, parseBackoff } from "../core/backoff.ts";
import {
  type Breaker,
  CircuitBreaker,
  type CircuitBreakerOptions,
  isBreaker,
} from "../core/breaker.ts";
import {
  type Admission,
  isAdmission,
  RetryBudget,
  type RetryBudgetOptions,
} from "../core/budget.ts";
import { type Clock, systemClock } from "../core/clock.ts";
import { callDeadline } from "../core/deadline.ts";
import type { RetryRules } from "../core/decide.ts";
import type { GiveUpReason } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import { type HedgeOptions, Hedging } from "../core/hedge.ts";
import type { Ledger } from "../core/ledger.ts";
import { isLimiter, type Limiter, RateLimiter, type RateLimiterOptions } from "../core/limiter.ts";
import { MAX_DELAY_MS } from "../core/retry-after.ts";
import type { Price, Usage } from "../core/usage.ts";
import { opt, type Parsed, parseOptions, type Rule, type Validator } from "../core/validate.ts";
import type { AttemptOwner } from "./attempt.ts";
import { type GateRequest, type Gates, gatesOf } from "./gates.ts";

/** The owner of a lean call's first attempt, and what its gates are asked. */
export type LeanOwner = AttemptOwner & GateRequest;

import { reportHookError } from "./hooks.ts";
import { isObserver, type Observer, type WaitCause } from "./observer.ts";

/** What `onRetry` is told before a retry. */
export interface RetryEvent {
  /** The attempt that just failed (1 for the first). */
  readonly attempt: number;
  readonly error: unknown;
  readonly failure: Failure;
  /** How long the policy is about to wait. */
  readonly delayMs: number;
  readonly ledger: Ledger;
  /** Set when the attempt about to go is a hedge (rule 21): the attempt in flight has
   * shown nothing for the hedge delay and is still running; `error` is undefined. */
  readonly hedge?: true;
}

/** What `onWait` is told of each wait before an attempt. */
export interface WaitEvent {
  /** The server's Retry-After, the backoff, or the rate limiter (its queue or a 429's hold). */
  readonly why: WaitCause;
  /** How long: a retry's wait is told before it begins, a rate-limit wait once it ended. */
  readonly ms: number;
  /** The attempt the wait comes before (1 for the first). */
  readonly attempt: number;
  /** The failure a retry waits after; undefined for a rate-limit wait. */
  readonly failure: Failure | undefined;
  readonly ledger: Ledger;
}

/** What `onGiveUp` is told when a call ends without a value. */
export interface GiveUpEvent {
  readonly reason: GiveUpReason;
  readonly error: unknown;
  readonly failure: Failure | undefined;
  readonly ledger: Ledger;
}

/** What `onSuccess` is told when a call succeeds. */
export interface SuccessEvent {
  readonly attempts: number;
  readonly ledger: Ledger;
}

/** Everything a policy can be told; every option is validated when the policy is built. */
export interface PolicyOptions {
  /** Attempts per logical call, including the first (p-retry's `retries: 2` is
   * `maxAttempts: 3`). Given, it caps every call. @default 3 for a call with no deadline
   * (what the SDKs send: moving to breakwater adds no load); for a call with one (its own
   * `deadlineMs` or its run's), `DEADLINE_ATTEMPTS` (10): the deadline and the admission
   * bound its retries, and the cap is only a backstop (rule 1) */
  maxAttempts?: number;
  /** The wait when the server gives no hint: options for the built-in full-jitter
   * exponential backoff, or your own `Backoff`. @default { baseMs: 500, capMs: 8000 } */
  backoff?: BackoffOptions | Backoff;
  /** Retry-After is honoured up to `maxMs` (default 30 000). Beyond it, `beyondMax` says
   * what happens: "give-up" (the default: the call ends at once with reason
   * `retry-after-too-long`, the server's backpressure respected) or "wait-max" (wait
   * `maxMs` and retry, as ky's `maxRetryAfter` does). The wait is U(hint, 2·hint), the
   * extra capped at `jitterMs` (default 10 000), so clients told the same reset time do
   * not return together. */
  retryAfter?: { maxMs?: number; jitterMs?: number; beyondMax?: "give-up" | "wait-max" };
  /** Each attempt's own timeout, in ms. @default none */
  attemptTimeoutMs?: number;
  /** The logical call's deadline in ms, set when it starts. @default none */
  deadlineMs?: number;
  /** Streams: time from the attempt's start to the first content chunk. @default none */
  firstTokenTimeoutMs?: number;
  /** Streams: the longest gap between chunks once content flows. @default none */
  idleTimeoutMs?: number;
  /** Streams: a cap on one attempt's whole duration. @default none */
  totalTimeoutMs?: number;
  /** Admits retries per upstream (share one policy, or one admission, per provider × model
   * × key). An `AdaptiveAdmission` (overload-aware), a `RetryBudget` (the fixed token
   * bucket), your own `Admission`, options for a RetryBudget, or `false` for none.
   * @default an AdaptiveAdmission shared by every call of this policy */
  budget?: Admission | RetryBudgetOptions | false;
  /** The same as `budget`, by what it is: what admits retries (give one of the two). */
  admission?: Admission | RetryBudgetOptions | false;
  /** Outside the retry loop: a `CircuitBreaker`, your own `Breaker`, or options for a
   * CircuitBreaker shared by every call of this policy. @default none */
  breaker?: Breaker | CircuitBreakerOptions;
  /** Keeps calls under the upstream's rate limits and within what it can take at once,
   * before they are sent: a `RateLimiter` (share one per key × model), options for one on
   * the policy's clock, or `false` for none. Calls wait for room while their deadline
   * allows; the fetch layer feeds it every response's rate-limit headers.
   * @default a RateLimiter shared by every call of this policy: it learns the limits from
   * the headers and the concurrency from the answers, and lets everything through until
   * either says otherwise */
  limiter?: Limiter | RateLimiterOptions | false;
  /** @default systemClock */
  clock?: Clock;
  /** [0, 1) source for jitter; inject for tests. @default Math.random */
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
  /** Called for every wait before an attempt: a retry's (Retry-After or backoff) and the
   * rate limiter's (its errors never change the outcome). What the upstream asked for (a
   * Retry-After, a 429's hold on every call) is capped at `retryAfter.maxMs`; every wait by
   * the deadline. */
  onWait?: (event: WaitEvent) => void;
  /** Called when a call ends without a value (its errors never change the outcome). */
  onGiveUp?: (event: GiveUpEvent) => void;
  /** Called when a call succeeds (its errors never change the outcome). */
  onSuccess?: (event: SuccessEvent) => void;
  /** Watches every call: spans, metrics (`otel()` from `breakwater/otel`). @default none */
  observe?: Observer;
  /** Hedged first tokens (docs/architecture.md, rule 21): when an attempt has shown no
   * first content (a stream's first content chunk, a JSON answer's headers) after the
   * delay, one more attempt goes to the same upstream; the first to show content wins and
   * the other is aborted at once. `true` for the defaults (after the p95 of recent
   * first-content times, at most 5% more requests), or options. Never for a request that
   * is not safe to send twice (`effect: "unsafe"`, `hedge: false` on the call), nor while
   * the upstream shows overload. Off by default: the loser's prompt is billed.
   * @default false */
  hedge?: boolean | HedgeOptions;
}

/** The attempt cap of a call with a deadline when none is given (`maxAttempts`): a
 * backstop, not the bound. The deadline (the user's patience) and the admission (what the
 * upstream can still serve) end the retries first; chosen in the storm (docs/storm.md). */
export const DEADLINE_ATTEMPTS = 10;

/** The validated, frozen options a policy runs on. */
export interface ResolvedOptions extends RetryRules {
  /** The attempt cap of a call with a deadline: `maxAttempts` when given, else
   * `DEADLINE_ATTEMPTS`. */
  readonly deadlineMaxAttempts: number;
  /** The rules `decide` reads for a call with a deadline (the same but the cap). */
  readonly deadlineRules: RetryRules;
  readonly attemptTimeoutMs: number;
  readonly deadlineMs: number;
  readonly firstTokenTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly totalTimeoutMs: number;
  readonly budget: Admission | undefined;
  readonly breaker: Breaker | undefined;
  readonly limiter: Limiter | undefined;
  readonly clock: Clock;
  readonly classify: ((error: unknown, nowMs: number) => Failure | undefined) | undefined;
  readonly model: string | undefined;
  readonly price: Price | undefined;
  /** Prices per model, for a call that names its own. */
  readonly prices: Readonly<Record<string, Price>>;
  readonly usage: ((value: unknown) => Partial<Usage> | undefined) | undefined;
  readonly onRetry: PolicyOptions["onRetry"];
  readonly onWait: PolicyOptions["onWait"];
  readonly onGiveUp: PolicyOptions["onGiveUp"];
  readonly onSuccess: PolicyOptions["onSuccess"];
  readonly observe: Observer | undefined;
  /** Hedging's delay and budget, when the policy hedges. */
  readonly hedge: Hedging | undefined;
  /** The gates every attempt passes, made from the breaker, limiter and admission. */
  readonly gates: Gates;
  /** Set when a call with no options has nothing to bound, watch or refuse (no deadline,
   * no observer, no hooks on success, no gate that refuses or waits): its first attempt
   * runs with this owner, and a Call is made only if it fails (`execute`'s lean path). */
  readonly lean: LeanOwner | undefined;
}

/** An optional timeout: none (Infinity) when absent, else ms > 0 up to a timer's limit. */
const timeout: Rule<number> = (v, name, x) =>
  x === undefined ? Number.POSITIVE_INFINITY : Math.min(v.ms(name, x), MAX_DELAY_MS);

const price: Rule<Price> = (v, name, x) => {
  const p = v.object(name, x);
  v.known(name, p, ["inputPerMillion", "outputPerMillion"]);
  v.num(`${name}.inputPerMillion`, p.inputPerMillion, 0);
  v.num(`${name}.outputPerMillion`, p.outputPerMillion, 0);
  return p as unknown as Price;
};

const prices: Rule<Readonly<Record<string, Price>>> = (v, name, x) => {
  if (x === undefined) return {};
  const all = v.object(name, x);
  for (const model of Object.keys(all)) price(v, `${name}.${model}`, all[model]);
  return all as Record<string, Price>;
};

/** A value of our own making, one built by the user, or options to build ours from. */
function either<T>(is: (x: unknown) => x is T, allowed: string): Rule<T | object | undefined> {
  return (v: Validator, name: string, x: unknown) => {
    if (x === undefined || is(x)) return x;
    if (x === null || typeof x !== "object" || Array.isArray(x)) v.fail(name, x, allowed);
    return x;
  };
}

const admissionRule = either(
  (x): x is Admission | false => x === false || isAdmission(x),
  "an Admission (tryAcquire, onSuccess), RetryBudget options, or false",
);

/** The one table of policy options: the key list and every check derive from it. */
const SPEC = {
  maxAttempts: opt.int({ min: 1, infinite: true }),
  backoff: either(isBackoff, "a Backoff (an object with delay()) or backoff options"),
  retryAfter: opt.object({
    maxMs: opt.num({ max: MAX_DELAY_MS, default: 30_000 }),
    jitterMs: opt.num({ max: MAX_DELAY_MS, default: 10_000 }),
    beyondMax: opt.oneOf(["give-up", "wait-max"] as const, "give-up"),
  }),
  attemptTimeoutMs: timeout,
  deadlineMs: timeout,
  firstTokenTimeoutMs: timeout,
  idleTimeoutMs: timeout,
  totalTimeoutMs: timeout,
  budget: admissionRule,
  admission: admissionRule,
  breaker: either(isBreaker, "a Breaker (tryAcquire, onSuccess, onFailure, onNeutral) or options"),
  limiter: either(
    (x): x is Limiter | false => x === false || isLimiter(x),
    "a Limiter (a RateLimiter, or tryAcquire, acquire, observeHeaders, hold, headroom), RateLimiter options, or false",
  ),
  clock: opt.clock(),
  random: opt.fn<() => number>(),
  classify: opt.fn<ResolvedOptions["classify"]>(),
  model: opt.str(),
  prices,
  usage: opt.fn<ResolvedOptions["usage"]>(),
  onRetry: opt.fn<PolicyOptions["onRetry"]>(),
  onWait: opt.fn<PolicyOptions["onWait"]>(),
  onGiveUp: opt.fn<PolicyOptions["onGiveUp"]>(),
  onSuccess: opt.fn<PolicyOptions["onSuccess"]>(),
  observe: opt.any<Observer>(isObserver, "an Observer (an object with call())"),
  hedge: ((v, name, x) => {
    if (x === undefined || x === false) return undefined;
    if (x === true) return new Hedging({}, v, name);
    if (x === null || typeof x !== "object" || Array.isArray(x))
      v.fail(
        name,
        x,
        "true, false, or hedge options ({ afterMs, percentile, maxExtraRatio, minSamples })",
      );
    return new Hedging(x as HedgeOptions, v, name);
  }) as Rule<Hedging | undefined>,
} satisfies Record<keyof PolicyOptions, Rule<unknown>>;

/** The names of a policy's options (what an adapter's own options are told apart from). */
export const POLICY_OPTIONS: readonly string[] = Object.freeze(Object.keys(SPEC));

/** The policy's admission: the one given, a RetryBudget from options, none for `false`,
 * and by default an adaptive one on the policy's own clock and random source. */
function admissionOf(
  budget: Admission | object | false | undefined,
  clock: Clock,
  random: (() => number) | undefined,
): Admission | undefined {
  if (budget === false) return undefined;
  if (budget === undefined) return new AdaptiveAdmission({ clock, ...(random && { random }) });
  return isAdmission(budget) ? budget : new RetryBudget(budget as RetryBudgetOptions);
}

/** The owner of a lean call's first attempt: no signal, no deadline; a hook error is
 * reported as a warning (no ledger is kept for a call that succeeds unwatched). */
function leanOwner(
  clock: Clock,
  attemptTimeoutMs: number,
  limiter: Limiter | undefined,
): LeanOwner {
  const reporter = {
    report: (hook: string, error: unknown) => reportHookError(undefined, hook, error),
  };
  return Object.freeze({
    clock,
    signal: undefined,
    deadline: callDeadline(0, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY),
    attemptTimeoutMs,
    weak: false,
    limiter,
    report: reporter.report,
    // What the gates are asked for a call with no options.
    cost: {},
    group: undefined,
    priority: 0,
    started: true,
    deadlineAt: Number.POSITIVE_INFINITY,
    waitUntil: Number.POSITIVE_INFINITY, // the lean path never waits at a gate
    holdMs: Number.POSITIVE_INFINITY,
    cancel: undefined,
    reporter,
  });
}

/** The policy's gates from their options: its admission, breaker and rate limiter. */
function partsOf(
  o: Pick<Parsed<typeof SPEC>, "budget" | "admission" | "breaker" | "limiter">,
  v: Validator,
  time: Clock,
  random: (() => number) | undefined,
) {
  if (o.budget !== undefined && o.admission !== undefined)
    v.fail("admission", o.admission, "one of budget and admission (the same option), not both");
  const { breaker, limiter } = o;
  return {
    budget: admissionOf(o.admission ?? o.budget, time, random),
    breaker:
      isBreaker(breaker) || breaker === undefined
        ? breaker
        : new CircuitBreaker({ clock: time, ...(breaker as CircuitBreakerOptions) }),
    limiter:
      limiter === false
        ? undefined
        : isLimiter(limiter)
          ? limiter
          : new RateLimiter({ clock: time, ...(limiter as RateLimiterOptions | undefined) }),
  };
}

/** The longest a 429's hint holds the limiter: "wait-max" waits the cap past a longer
 * Retry-After and retries, so its hold lasts no longer. */
const holdCapOf = (r: { maxMs: number; beyondMax: string }) =>
  r.beyondMax === "wait-max" ? r.maxMs : Number.POSITIVE_INFINITY;

/** A policy whose calls with no options may take the lean path: nothing to watch or bound. */
const isLean = (o: Partial<PolicyOptions>) =>
  o.observe === undefined &&
  o.hedge === undefined &&
  o.onSuccess === undefined &&
  o.usage === undefined &&
  o.deadlineMs === Number.POSITIVE_INFINITY;

/** The rules `decide` reads: without a deadline (`maxAttempts`: the given cap, else 3) and
 * with one (the given cap, else `DEADLINE_ATTEMPTS`), both frozen once. */
function rulesOf(
  o: Pick<Parsed<typeof SPEC>, "maxAttempts" | "backoff" | "retryAfter" | "random">,
  v: Validator,
) {
  const rules = {
    backoff: isBackoff(o.backoff) ? o.backoff : parseBackoff(v, o.backoff, "backoff"),
    retryAfterMaxMs: o.retryAfter.maxMs,
    retryAfterJitterMs: o.retryAfter.jitterMs,
    retryAfterBeyondMax: o.retryAfter.beyondMax,
    random: o.random ?? Math.random,
  };
  const deadlineMaxAttempts = o.maxAttempts ?? DEADLINE_ATTEMPTS;
  return {
    ...rules,
    maxAttempts: o.maxAttempts ?? 3,
    deadlineMaxAttempts,
    deadlineRules: Object.freeze({
      ...rules,
      maxAttempts: deadlineMaxAttempts,
      cutMaxAttempts: o.maxAttempts ?? 3,
    }),
  };
}

/** Validates every option at construction: a bad one throws naming option, value and rule. */
export function resolveOptions(options: PolicyOptions, v: Validator): ResolvedOptions {
  const { retryAfter, prices, budget, admission, breaker, limiter, backoff, clock, ...rest } =
    parseOptions(v, SPEC, options);
  const time = clock ?? systemClock;
  const model = rest.model;
  const rules = rulesOf(
    { maxAttempts: rest.maxAttempts, backoff, retryAfter, random: rest.random },
    v,
  );
  const parts = partsOf({ budget, admission, breaker, limiter }, v, time, rest.random);
  const gates = gatesOf(parts, holdCapOf(retryAfter));
  const lean = isLean(rest) && gates.quick;
  return Object.freeze({
    ...rest,
    ...rules,
    ...parts,
    gates,
    lean: lean ? leanOwner(time, rest.attemptTimeoutMs, parts.limiter) : undefined,
    clock: time,
    price: model === undefined || !Object.hasOwn(prices, model) ? undefined : prices[model],
    prices,
  });
}
