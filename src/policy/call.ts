import { classify } from "../core/classify.ts";
import type { Clock } from "../core/clock.ts";
import { callDeadline, type Deadline } from "../core/deadline.ts";
import { decide, type RetryRules, type RetryState } from "../core/decide.ts";
import { EFFECTS, type Effect } from "../core/effects.ts";
import {
  BreakwaterError,
  type GiveUpReason,
  isOwnReason,
  type PartialResult,
  tagError,
} from "../core/errors.ts";
import { type Failure, failure, isOutputKind } from "../core/failure.ts";
import type { Hedging } from "../core/hedge.ts";
import { type AttemptRecord, Ledger } from "../core/ledger.ts";
import type { Cost } from "../core/limiter.ts";
import { scrubError } from "../core/redact.ts";
import { MAX_DELAY_MS } from "../core/retry-after.ts";
import { isA } from "../core/safe.ts";
import type { Usage } from "../core/usage.ts";
import { opt, type Rule } from "../core/validate.ts";
import { isRun, partsOf } from "../run/internal.ts";
import type { RunLimits } from "../run/limits.ts";
import type { Run } from "../run/run.ts";
import { Attempt, type AttemptEnd, type AttemptOwner, endGrants, type Grant } from "./attempt.ts";
import { type GateRequest, Refusal } from "./gates.ts";
import type { RaceNews } from "./hedged.ts";
import { reportHookError, runHook } from "./hooks.ts";
import type { CallWatch, Observer, WaitCause } from "./observer.ts";
import type { ResolvedOptions } from "./options.ts";

/** What every attempt is handed. */
export interface AttemptContext {
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** Aborts at the attempt's timeout, the deadline, or the caller's abort. */
  readonly signal: AbortSignal;
  /** The call's deadline as a time on the policy's clock (Infinity when none). */
  readonly deadline: number;
  /** Time this attempt may take: min(attempt timeout, call deadline, run share). */
  readonly remainingMs: number;
  /** The model that answered, as the answer names it (`gen_ai.response.model` in
   * telemetry, `responseModel` in the ledger). */
  answeredBy(model: string): void;
  /** The answer began: a JSON answer's headers came (the fetch layer says so). A hedge
   * race (rule 21) is decided for this attempt; without it, when the operation settles. */
  answering(): void;
}

/** Per-call options of `execute` and `stream`. */
export interface CallOptions {
  /** Cancels the call: the attempt in flight and any wait. */
  signal?: AbortSignal;
  /** The run this call draws on (deadline, attempts, tokens). */
  run?: Run;
  /** Narrows retry for this call: return false to refuse a retry the policy would allow
   * (e.g. a write that may have executed). It can only make the policy stricter. */
  retryIf?: (failure: Failure, error: unknown) => boolean;
  /** Classifies this call's errors before the policy's `classify` and the built-in one;
   * return undefined to fall through to them. */
  classify?: (error: unknown, nowMs: number) => Failure | undefined;
  /** An absolute deadline on the policy's clock that this call may not pass, beside its
   * own `deadlineMs` (a fallback chain shares one across its upstreams). */
  deadlineAt?: number;
  /** Fewer attempts than the policy allows, for this call (what a chain has left). */
  maxAttempts?: number;
  /** A wait before this call's first attempt that happened outside it (a pool's wait for
   * a deployment's recovery): told to `onWait` and the observer as the call begins, and
   * booked on the first attempt's `waitMs`. */
  waited?: { readonly ms: number; readonly why: WaitCause; readonly failure?: Failure };
  /** The longest this call waits at the rate limiter before an attempt (its queue for room,
   * a 429's hold on every call): a longer wait is refused at once with `rate-limit-wait`
   * (a chain whose next upstream has room sets it short: wait if short, switch if long).
   * @default the deadline for a wait for room; a hold is capped as a Retry-After is, at the
   * policy's `retryAfter.maxMs` */
  maxWaitMs?: number;
  /** The longest wait this call sleeps in the process before a retry: a wait the upstream
   * asked for (a Retry-After, a 429's hold on every call), an open breaker's cool-off or
   * the backoff. A retry that would wait longer is admitted and then handed back, the call
   * ending with `deferred` (the rate limiter's hold, `rate-limit-wait`; the breaker,
   * `circuit-open`) and the wait on the error (`retryAfterMs`), for a durable engine to
   * wait in its own timer, where a process death cannot lose it. A wait for room in the
   * rate limiter's own queue stays here: its place in the queue is this process's, and
   * handing it out loses it (the storm's metastable success 98.3% -> 91.5%, its rate-limit
   * p50 wait 9.6 -> 22.7 s, seed 1). @default none: every wait is slept here */
  deferAfterMs?: number;
  /** This call's deadline in ms, in place of the policy's `deadlineMs` (the run's share
   * and `deadlineAt` still bound it). @default the policy's */
  deadlineMs?: number;
  /** This call's attempt timeout in ms, in place of the policy's `attemptTimeoutMs` (an
   * SDK's own `timeout`, given on the request). @default the policy's */
  attemptTimeoutMs?: number;
  /** Record the attempts into this ledger (a chain's, shared by its upstreams) instead of
   * a new one. The caller accounts for it with the run. */
  ledger?: Ledger;
  /** Names the upstream in the ledger's attempt records. */
  upstream?: string;
  /** What one attempt is expected to spend, for the policy's rate limiter: the prompt's
   * tokens and the output allowance (`max_tokens`). @default nothing but the request */
  cost?: Cost;
  /** Where this call stands in the rate limiter's queue: higher goes first (a critical
   * step). @default the run's priority, else 0 */
  priority?: number;
  /** The model this call asks for (the request's): names the call in telemetry and in its
   * ledger, and prices it when the policy has a price for it. @default the policy's `model` */
  model?: string;
  /** Who serves it, in the GenAI conventions' words ("openai", "anthropic", "gcp.gemini",
   * ...): for telemetry. @default unnamed */
  provider?: string;
  /** What it asks for ("chat", "embeddings", "text_completion", ...): for telemetry.
   * @default the observer's */
  operation?: string;
  /** The error the caller will be handed, when an adapter hands the answer the policy gave
   * up on to an SDK that raises its own (its class is what telemetry names). Settles with
   * undefined when the caller got the policy's own error or a value. */
  seenAs?: PromiseLike<unknown>;
  /** Opt-in: a retry the admission or the breaker refuses waits and asks again while the
   * call's deadline allows, instead of giving up at once (a call with no deadline never
   * waits). Off by default: in the storm it kept a metastable overload going (refused
   * retries came back later instead of never) and answered no more calls in outage-503.
   * @default false */
  patience?: boolean;
  /** What sending this request again does (docs/architecture.md, rule 20): "unsafe" (it
   * changes state on the server each time it arrives) is sent again only after a failure
   * that proves it never arrived (connection refused, a 429, 503 or 529); after any other
   * it gives up with `outcome-unknown`. @default "idempotent" */
  effect?: Effect;
  /** `false`: never hedge this call (rule 21), though the policy hedges. A call whose
   * `effect` is "unsafe" is never hedged. */
  hedge?: false;
}

export interface FailOptions {
  usage?: Partial<Usage> | undefined;
  /** Overrides the classification (an adapter's in-band error). */
  failure?: Failure;
  /** Output already reached the consumer: giving up is a `stream-interrupted`. */
  partial?: PartialResult | undefined;
  /** Gives up whatever the failure (output was shown and may not be replayed). */
  retry?: false;
  /** Runs once the retry is decided, before the wait (restart mode's onDiscard). */
  beforeWait?: () => unknown;
}

const isMs = (x: unknown) => typeof x === "number" && x > 0; // NaN is not > 0

const isSignal = (s: unknown) =>
  typeof (s as AbortSignal)?.addEventListener === "function" &&
  typeof (s as AbortSignal)?.aborted === "boolean";

/** The options every call takes: the table its validation derives from. */
export const CALL_SPEC = {
  signal: opt.any<AbortSignal>(isSignal, "an AbortSignal"),
  run: opt.any<Run>(isRun, "a Run (new Run({ ... }))"),
  retryIf: opt.fn<CallOptions["retryIf"]>(),
  classify: opt.fn<CallOptions["classify"]>(),
  deadlineAt: opt.any<number>(
    (x) => typeof x === "number" && !Number.isNaN(x),
    "a time on the policy's clock",
  ),
  maxAttempts: opt.any<number>((x) => Number.isInteger(x) && (x as number) >= 1, "an integer >= 1"),
  maxWaitMs: opt.any<number>((x) => typeof x === "number" && x >= 0, "a number of ms >= 0"),
  deferAfterMs: opt.any<number>((x) => typeof x === "number" && x >= 0, "a number of ms >= 0"),
  waited: opt.any<NonNullable<CallOptions["waited"]>>(
    (x) => typeof (x as { ms?: unknown } | null)?.ms === "number",
    "{ ms, why }: a wait before the first attempt",
  ),
  deadlineMs: opt.any<number>(isMs, "a number of ms > 0"),
  attemptTimeoutMs: opt.any<number>(isMs, "a number of ms > 0"),
  ledger: opt.any<Ledger>((x) => isA(x, Ledger), "a Ledger"),
  upstream: opt.str(),
  model: opt.str(),
  provider: opt.str(),
  operation: opt.str(),
  seenAs: opt.any<PromiseLike<unknown>>(
    (x) => typeof (x as PromiseLike<unknown> | null)?.then === "function",
    "a promise",
  ),
  cost: opt.object({
    inputTokens: opt.num({ min: 0, default: 0 }),
    outputTokens: opt.num({ min: 0, default: 0 }),
  }),
  priority: opt.any<number>((x) => Number.isFinite(x), "a finite number"),
  patience: opt.bool(),
  effect: opt.oneOf(EFFECTS),
  hedge: opt.any<false>((x) => x === false, "false (never hedge this call)"),
} satisfies Record<keyof CallOptions, Rule<unknown>>;

const CANCELLED = failure("cancelled");
/** What a hedge is admitted as, and what its race's loser is booked as. */
const HEDGE = failure("timeout", { code: "hedge" });
const LOST = failure("cancelled", { code: "hedge_lost" });
const UNKNOWN = failure("unknown");
const NO_COST: Cost = {};
/** The most common ends, made once: the success path allocates none. */
const OK: AttemptEnd = { how: "ok" };
const LEFT: AttemptEnd = { how: "left" };
const UNSENT: AttemptEnd = { how: "unsent" };

/** A call's own limit in ms (kept within a timer's range), else the policy's. */
const own = (ms: number | undefined, policy: number) =>
  ms === undefined ? policy : Math.min(ms, MAX_DELAY_MS);

const fullUsage = (u: Partial<Usage> | undefined): Usage | undefined =>
  u === undefined
    ? undefined
    : { inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0 };

/** The policy's hedging for a call that may hedge (rule 21); every call deposits its
 * share of the hedge budget. */
function hedgingOf(o: ResolvedOptions, options: CallOptions | undefined): Hedging | undefined {
  const h = o.hedge;
  h?.deposit();
  return options?.hedge === false || options?.effect === "unsafe" ? undefined : h;
}

/**
 * One logical call: the state of its retry loop (deadline, counters, ledger), not of its
 * attempts. `execute` and `stream` drive it: `begin` an attempt (through the gates), then
 * report success or failure. On failure the call asks `decide` for a verdict and performs
 * it: waits out the backoff and returns (retry), or throws what the caller should see
 * (docs/architecture.md, rules 1, 2, 6 and 8).
 */
export class Call implements AttemptOwner, GateRequest {
  // What its attempts read (AttemptOwner), as fields: an attempt reads them as it reads a
  // lean path's owner.
  readonly clock: Clock;
  /** The caller's signal. */
  readonly signal: AbortSignal | undefined;
  readonly deadline: Deadline;
  readonly attemptTimeoutMs: number;
  readonly weak: boolean;
  readonly #o: ResolvedOptions;
  readonly #options: CallOptions | undefined;
  readonly #limits: RunLimits | undefined;
  /** The rules decide reads: the policy's (with a deadline, its deadline cap), with this
   * call's own attempt cap if it has one. */
  readonly #rules: RetryRules;
  readonly #startedAt: number;
  /** Whether anything can refuse an attempt (spares the checks on the common path). */
  readonly #gated: boolean;
  readonly #watch: CallWatch | undefined;
  #ledger: Ledger | undefined;
  #n = 0;
  #attempt: Attempt | undefined;
  #waitBefore = 0;
  /** Waited at the gates for the attempt about to begin. */
  #heldMs = 0;
  /** The clock reading taken at construction, reused by the first attempt (clock reads
   * cost ~50 ns and dominate the success path). */
  #startNow: number | undefined;
  /** A stream's: the signal of its consumer leaving (made when first asked for). */
  #leaving: (() => AbortSignal) | undefined;
  #partial: PartialResult | undefined;
  #lastError: unknown;
  #lastFailure: Failure | undefined;
  /** The policy's hedging, unless this call may not hedge (rule 21). */
  readonly #hedging: Hedging | undefined;

  /** `adopted`: the first attempt, begun on the lean path (`leanOwner`) before this call
   * was made; the call takes it over as if it had begun it. */
  constructor(o: ResolvedOptions, options?: CallOptions, stream = false, adopted?: Attempt) {
    this.#o = o;
    this.#options = options;
    this.clock = o.clock;
    this.signal = options?.signal;
    this.attemptTimeoutMs = own(options?.attemptTimeoutMs, o.attemptTimeoutMs);
    this.weak = stream;
    this.#limits = options?.run === undefined ? undefined : partsOf(options.run)?.limits;
    this.#ledger = options?.ledger;
    const now = adopted?.startedAt ?? o.clock.now();
    this.#startNow = adopted === undefined ? now : undefined;
    this.#startedAt = now;
    if (adopted !== undefined) {
      this.#n = 1;
      this.#attempt = adopted;
      adopted.adopt(this);
    }
    const runAllows = this.#limits?.callDeadline(now) ?? Number.POSITIVE_INFINITY;
    const given = options?.deadlineAt ?? Number.POSITIVE_INFINITY;
    const deadlineMs = own(options?.deadlineMs, o.deadlineMs);
    this.deadline = callDeadline(now, Math.min(deadlineMs, given - now), runAllows);
    // With a deadline the cap is a backstop: the deadline and the admission end retries first.
    const rules = this.deadline.at === Number.POSITIVE_INFINITY ? o : o.deadlineRules;
    const cap = options?.maxAttempts;
    this.#rules =
      cap === undefined || cap >= rules.maxAttempts ? rules : { ...rules, maxAttempts: cap };
    this.#gated =
      options?.signal !== undefined ||
      this.#limits !== undefined ||
      this.deadline.at !== Number.POSITIVE_INFINITY;
    if (options?.ledger === undefined) this.#limits?.addCall(this.ledger);
    this.#hedging = hedgingOf(o, options);
    if (o.observe !== undefined) this.#watch = this.#watched(o.observe, options, stream);
    const waited = options?.waited;
    if (waited !== undefined && waited.ms > 0) {
      this.#heldMs = waited.ms;
      this.#told(waited.why, waited.ms, waited.failure);
    }
  }

  /** The observer's watch of this call, told what the call is. */
  #watched(observe: Observer, options: CallOptions | undefined, stream: boolean) {
    const info = {
      stream,
      model: options?.model ?? this.#o.model,
      upstream: options?.upstream,
      provider: options?.provider,
      operation: options?.operation,
    };
    return runHook(this, "observe", () => observe.call(info), undefined);
  }

  /** Takes what a hook or gate of the user's threw (rule 12). */
  report(hook: string, error: unknown): void {
    reportHookError(this, hook, error);
  }

  /** Made on first use: a call that succeeds with nobody watching (no run, no onSuccess,
   * no stream) never builds one, which keeps the success path cheap. */
  get ledger(): Ledger {
    const model = this.#options?.model;
    // A call's own model (the request's) is priced as the policy prices it, when it can.
    const prices = this.#o.prices;
    const price =
      model === undefined || !Object.hasOwn(prices, model) ? this.#o.price : prices[model];
    this.#ledger ??= new Ledger(this.#startedAt, model ?? this.#o.model, price);
    return this.#ledger;
  }

  /** Attempts begun so far. */
  get attempts(): number {
    return this.#n;
  }

  /**
   * Starts the next attempt through the gates (rule 1): refused when the caller aborted,
   * the run refuses, the deadline has passed, or a gate says no; a gate may make it wait
   * (the rate limiter, within the deadline), and then a promise of it is returned.
   * `leaving`, for a stream: a signal that ends such a wait when its consumer goes.
   */
  begin(leaving?: () => AbortSignal): Attempt | Promise<Attempt> {
    const gates = this.#o.gates;
    const now = this.#startNow ?? this.#o.clock.now();
    this.#startNow = undefined;
    if (this.#gated) this.#check(now);
    if (gates.fixed !== undefined) return this.#start(gates.fixed, now);
    this.#leaving = leaving;
    return this.#pass(0, [], now);
  }

  /** Passes gates `i` onwards, collecting their grants; after a wait the call's own
   * checks run again (the deadline may have passed meanwhile). */
  #pass(i: number, grants: Grant[], now: number): Attempt | Promise<Attempt> {
    const list = this.#o.gates.list;
    for (; i < list.length; i++) {
      let g: Grant | Promise<Grant>;
      try {
        g = list[i]!.enter(this);
      } catch (e) {
        return this.#refused(e, grants);
      }
      if (!(g instanceof Promise)) {
        grants.push(g);
        continue;
      }
      const next = i + 1;
      // Timed from here: a stream's call may have been made long before its first read.
      const from = this.#o.clock.now();
      return g.then(
        (grant) => {
          grants.push(grant);
          const after = this.#o.clock.now();
          if (after > from) this.#held(after - from);
          this.#check(after, grants);
          return this.#pass(next, grants, after);
        },
        (e: unknown) => {
          const after = this.#o.clock.now();
          if (after > from) this.#held(after - from); // waited, then refused: told all the same
          return this.#refused(e, grants);
        },
      );
    }
    return this.#start(grants, now);
  }

  /** A wait at a gate ended: booked on the attempt it held, told like every wait. */
  #held(ms: number): void {
    this.#heldMs += ms;
    this.#told("rate-limit", ms, undefined);
  }

  /** Tells the observer and `onWait` of a wait: a retry's (before it) or a gate's (after
   * it, when its length is known). */
  #told(why: WaitCause, ms: number, f: Failure | undefined): void {
    const watch = this.#watch;
    if (watch)
      runHook(
        this,
        "observe",
        () =>
          why === "retry-after" || why === "backoff"
            ? watch.wait(ms, why, f!)
            : watch.held?.(ms, why, f),
        undefined,
      );
    const onWait = this.#o.onWait;
    if (onWait === undefined) return;
    const event = { why, ms, attempt: this.#n + 1, failure: f, ledger: this.ledger };
    runHook(this, "onWait", () => onWait(event), undefined);
  }

  #start(grants: readonly Grant[], now: number, hedge = false): Attempt {
    const n = ++this.#n;
    this.#limits?.addAttempt(n > 1);
    const a = new Attempt(this, n, now, grants, hedge);
    if (this.#heldMs > 0) {
      a.heldMs = this.#heldMs;
      this.#heldMs = 0;
    }
    if (!hedge) this.#attempt = a;
    const watch = this.#watch;
    if (watch !== undefined)
      a.watch(runHook(this, "observe", () => watch.attempt(a.attempt, hedge), undefined));
    return a;
  }

  /** How long after `a` started a hedge may go (rule 21): undefined when this call does
   * not hedge; Infinity when none may go (no delay learned yet, or the deadline falls
   * first), though the time to first content is still learned. */
  hedgeDelay(a: Attempt): number | undefined {
    const h = this.#hedging;
    if (h === undefined) return undefined;
    const ms = h.delayMs;
    if (ms === undefined || a.startedAt + ms >= this.deadline.at) return Number.POSITIVE_INFINITY;
    return ms;
  }

  /**
   * A hedge of the attempt in flight, through the gates like any attempt (rule 21), or
   * undefined when it may not go: the caller left, the run or deadline refuse, a gate shows
   * overload or would have it wait, the hedge budget or the admission refuse, `onRetry`
   * vetoes it.
   */
  hedge(): Attempt | undefined {
    const h = this.#hedging;
    const o = this.#o;
    const now = o.clock.now();
    if (h === undefined || this.signal?.aborted || now >= this.deadline.at) return undefined;
    if (this.#n >= this.#rules.maxAttempts) return undefined; // a hedge is an attempt
    if (this.#limits?.refuseAttempt(now) !== undefined || !h.calm(now) || !o.gates.calm(this))
      return undefined;
    if (!h.take()) return undefined;
    const grants = o.gates.tryEnter(this);
    if (grants === undefined) {
      h.giveBack();
      return undefined;
    }
    const refused = o.gates.admit(HEDGE, this);
    const onRetry = o.onRetry;
    const vetoed =
      refused === undefined &&
      onRetry !== undefined &&
      runHook(this, "onRetry", () => onRetry(this.#hedgeEvent()), undefined) === false;
    if (refused !== undefined || vetoed) {
      if (vetoed) o.gates.refund(this);
      endGrants(grants, UNSENT, 0, this);
      h.giveBack();
      return undefined;
    }
    return this.#start(grants, now, true);
  }

  #hedgeEvent() {
    const n = this.#n;
    return {
      attempt: n,
      error: undefined,
      failure: HEDGE,
      delayMs: 0,
      ledger: this.ledger,
      hedge: true as const,
    };
  }

  /** What a hedge race tells its call (rule 21): the race keeps its own books, and this
   * is the one call through which the call learns of them. */
  raced(news: RaceNews): void {
    if ("won" in news) this.#won(news.won, news.first, news.raced);
    else if ("lost" in news) this.#lost(news.lost, news.usage);
    else {
      if (news.failed !== undefined) this.settle(news.failed.error, {}, news.failed.attempt);
      this.#attempt = news.goOn;
    }
  }

  /** `a` showed its first content (first, when `raced`): it is the call's attempt from
   * now on. What is learned is how long `first` (the attempt a hedge would race) went
   * without content: its time to first content, or, cut by a hedge that won, the time
   * it had waited (a lower bound). Learning the winner's time instead would learn the
   * hedge's own speed, and each hedge would make the next come sooner. */
  #won(a: Attempt, first: Attempt, raced: boolean): void {
    this.#hedging?.learn(this.#o.clock.now() - first.startedAt);
    this.#attempt = a;
    if (raced) a.raced = "won";
  }

  /** A race's attempt the call no longer waits for (its stream's consumer left): cut,
   * its grants ended with no verdict, not booked (as `abandon`). */
  drop(a: Attempt): void {
    if (a.ended) return;
    a.raced = "lost";
    a.cancel(new BreakwaterError("cancelled", { cause: "the stream's consumer left" }));
    a.end(LEFT);
  }

  /** `a` lost a hedge race: cut at once, booked with what it is estimated to have cost
   * (its prompt, once sent; what it said of its usage, if anything), its grants ended
   * with no verdict on the upstream. */
  #lost(a: Attempt, usage: Partial<Usage> | undefined): void {
    a.cancel(new BreakwaterError("cancelled", { cause: "a hedge of this call answered first" }));
    a.raced = "lost";
    const spent = fullUsage(usage) ?? { inputTokens: this.cost.inputTokens ?? 0, outputTokens: 0 };
    a.end({ how: "left", usage: spent });
    this.#record("failed", LOST, spent, a);
  }

  /** The policy's limiter (a layer under an attempt tells it what it heard). */
  get limiter() {
    return this.#o.limiter;
  }

  // What the gates are asked for the next attempt (GateRequest), read only by a gate
  // that needs it: the call is the request, nothing is made per attempt.
  get cost(): Cost {
    return this.#options?.cost ?? NO_COST;
  }
  get group(): object | undefined {
    return this.#options?.run?.root;
  }
  get priority(): number {
    const o = this.#options;
    return o?.priority ?? o?.run?.priority ?? 0;
  }
  /** Whether the call's run has paid for an answer yet (a call with no run: it has). */
  get started(): boolean {
    return this.#limits?.started ?? true;
  }
  get deadlineAt(): number {
    return this.deadline.at;
  }
  get waitUntil(): number {
    const most = this.#options?.maxWaitMs;
    const at = this.deadline.at;
    return most === undefined ? at : Math.min(at, this.#o.clock.now() + most);
  }
  get holdMs(): number {
    const most = this.#localWaitMs ?? this.#o.retryAfterMaxMs;
    return Math.min(this.deadline.at - this.#o.clock.now(), most);
  }
  /** The longest a 429's hold may keep this call here, as the call says (`maxWaitMs`,
   * `deferAfterMs`); the wait for room in the queue reads only `maxWaitMs`. */
  get #localWaitMs(): number | undefined {
    const o = this.#options;
    const wait = o?.maxWaitMs;
    const defer = o?.deferAfterMs;
    return defer === undefined ? wait : wait === undefined ? defer : Math.min(wait, defer);
  }
  get reporter(): this {
    return this;
  }
  /** Ends a wait at a gate: the caller's abort, or (a stream) its consumer leaving. */
  get cancel(): AbortSignal | undefined {
    const caller = this.#options?.signal;
    const left = this.#leaving?.();
    return left === undefined
      ? caller
      : caller === undefined
        ? left
        : AbortSignal.any([caller, left]);
  }

  /** A gate said no: what it granted so far goes back whole (nothing was sent), and the
   * call gives up: cancelled when the caller (or a stream's consumer) left during a wait. */
  #refused(e: unknown, grants: readonly Grant[]): never {
    endGrants(grants, UNSENT, 0, this);
    const caller = this.#options?.signal;
    if (caller?.aborted) this.#giveUp("cancelled", caller.reason, CANCELLED);
    const left = this.#leaving?.();
    if (left?.aborted) this.#giveUp("cancelled", left.reason, CANCELLED);
    if (!isA(e, Refusal)) throw e;
    this.#giveUp(e.reason, this.#lastError ?? e.cause, this.#lastFailure, e.waitMs, e.words);
  }

  /** Gives up before an attempt when the caller, the run or the deadline say no; a later
   * attempt refused keeps the provider's last error as the cause (rule 8). */
  #check(now: number, held: readonly Grant[] = []): void {
    const caller = this.#options?.signal;
    const refused = caller?.aborted
      ? "cancelled"
      : (this.#limits?.refuseAttempt(now) ??
        (now >= this.deadline.at ? this.deadline.by : undefined));
    if (refused === undefined) return;
    endGrants(held, UNSENT, 0, this);
    if (refused === "cancelled") this.#giveUp("cancelled", caller!.reason, undefined);
    this.#giveUp(refused, this.#lastError, this.#lastFailure);
  }

  /** The attempt ends with no verdict on the upstream (a consumer left, a hook failed):
   * what it held is released, nothing is decided. `sent: false`: it never went out. */
  abandon(sent = true): void {
    this.#attempt?.end(sent ? LEFT : UNSENT);
  }

  /** The attempt the call goes on with (a hedge race's winner, once decided). */
  get current(): Attempt | undefined {
    return this.#attempt;
  }

  /** Reads usage from a result with `read` (or the policy's reader); a reader that
   * throws reads as no usage. */
  usageOf(value: unknown, read = this.#o.usage): Usage | undefined {
    if (read === undefined) return undefined;
    return fullUsage(runHook(this, "usage", () => read(value), undefined));
  }

  /** The attempt succeeded. `left`: it ended before the upstream showed anything (a
   * consumer who stopped before the first content chunk): recorded, but no verdict. */
  succeed(given?: Partial<Usage>, left = false): void {
    const o = this.#o;
    const usage = given ?? this.#attempt?.spent;
    this.#attempt?.end(
      left ? { how: "left", usage } : usage === undefined ? OK : { how: "ok", usage },
    );
    if (!left) this.#limits?.answered();
    // A stream's outcome reads the ledger; an unwatched execute needs none.
    if (this.#ledger === undefined && !this.weak && o.onSuccess === undefined && !this.#watch)
      return;
    this.ledger.endedAt = this.#record("ok", undefined, fullUsage(usage));
    const event = { attempts: this.#n, ledger: this.ledger };
    if (o.onSuccess) runHook(this, "onSuccess", () => o.onSuccess!(event), undefined);
    const watch = this.#watch;
    if (watch)
      runHook(this, "observe", () => watch.end({ ok: true, ledger: this.ledger }), undefined);
  }

  /** Classifies the failure of the attempt that is running: our own cuts first (rule 3). */
  classify(error: unknown, a: Attempt | undefined = this.#attempt): Failure {
    if (a?.callerAborted) return CANCELLED;
    if (a?.timedOut) return failure("timeout", { code: `${a.timedOut.by}_timeout` });
    const now = this.#o.clock.now();
    const own = this.#options?.classify;
    const policy = this.#o.classify;
    // A classifier that throws cannot say the failure is transient: unknown, not retried.
    const mine =
      (own && runHook(this, "classify", () => own(error, now), UNKNOWN)) ??
      (policy && runHook(this, "classify", () => policy(error, now), UNKNOWN));
    if (mine !== undefined) return mine;
    const f = classify(error, now);
    // An abort nobody we know of asked for (not the caller, not our timeouts, not a consumer
    // that left) came from inside the attempt: an SDK's own timeout (@google/genai aborts
    // with a bare AbortError).
    if (f.kind === "cancelled" && f.status === undefined && a && !a.aborted && !a.ended)
      return failure("timeout", { code: "inner_abort" });
    return f;
  }

  /** The attempt failed: waits and returns when the call should try again; otherwise
   * throws what the caller should see. */
  fail(error: unknown, more: FailOptions = {}): Promise<void> {
    return this.after(this.settle(error, more), error, more);
  }

  /** What follows a settled failure: decide, admit, wait (or give up). */
  async after(f: Failure, error: unknown, more: FailOptions = {}): Promise<void> {
    const verdict = decide(this.#state(f, more), f, this.#o.clock.now(), this.#rules);
    if (!verdict.retry)
      this.#giveUp(verdict.reason, this.#errorFor(verdict.reason, error), f, verdict.retryAfterMs);
    const waited = await this.#admitted(verdict.delayMs, error, f);
    // A wait longer than this process holds goes to the durable engine that called: the
    // retry is admitted (the engine sends it), its wait named on the error.
    const defer = this.#options?.deferAfterMs;
    if (defer !== undefined && verdict.delayMs - waited > defer)
      this.#giveUp("deferred", error, f, verdict.delayMs - waited);
    this.#onRetry(verdict.delayMs, error, f);
    this.#told(f.retryAfterMs === undefined ? "backoff" : "retry-after", verdict.delayMs, f);
    this.#partial = undefined;
    await this.#beforeWait(more.beforeWait);
    await this.#sleep(Math.max(0, verdict.delayMs - waited));
    this.#waitBefore = Math.max(verdict.delayMs, waited);
  }

  /** Waits on the policy's clock; the caller's abort ends the call at once. */
  async #sleep(ms: number): Promise<void> {
    try {
      await this.#o.clock.sleep(ms, this.#options?.signal);
    } catch {
      this.#giveUp("cancelled", this.#options?.signal?.reason, CANCELLED);
    }
  }

  /**
   * Asks the gates for the retry the rules allow (the breaker must not be open, the
   * admission must grant it). Refused, it gives up; or, with `patience`, waits (the backoff
   * of one more round each time) and asks again while the call's deadline allows. Returns
   * how long it waited.
   */
  async #admitted(delayMs: number, error: unknown, f: Failure): Promise<number> {
    const o = this.#o;
    const started = o.clock.now();
    let wait = delayMs;
    for (let round = this.#n + 1; ; round++) {
      const refused = o.gates.admit(f, this);
      if (refused === undefined) return o.clock.now() - started;
      const at = this.deadline.at;
      if (at === Number.POSITIVE_INFINITY || this.#options?.patience !== true)
        this.#giveUp(refused.reason, error, f, refused.waitMs);
      wait = Math.min(MAX_DELAY_MS, Math.max(0, o.backoff.delay(round, f.kind, wait, o.random)));
      if (!(o.clock.now() + wait < at)) this.#giveUp(refused.reason, error, f, refused.waitMs);
      await this.#sleep(wait);
    }
  }

  /** Restart mode's onDiscard: its failure is reported, the retry goes on. */
  async #beforeWait(hook: (() => unknown) | undefined): Promise<void> {
    if (hook === undefined) return;
    try {
      await hook();
    } catch (error) {
      reportHookError(this, "onDiscard", error);
    }
  }

  /** Books the failed attempt: classified, in the ledger, its grants ended (the breaker,
   * the admission and the rate limiter hear it). Synchronous, so an attempt cut while
   * nobody reads is settled at once. */
  settle(error: unknown, more: FailOptions = {}, a: Attempt | undefined = this.#attempt): Failure {
    const f = more.failure ?? this.classify(error, a);
    this.#o.hedge?.heard(f, this.#o.clock.now());
    this.#lastError = error;
    this.#lastFailure = f;
    const usage = more.usage ?? a?.spent ?? this.#estimate(more.partial, a);
    a?.end(
      usage === undefined ? { how: "failed", failure: f } : { how: "failed", failure: f, usage },
    );
    this.#record("failed", f, fullUsage(usage), a);
    this.#partial = more.partial;
    return f;
  }

  /** What a stream cut after content cost when it said nothing of it (rule 7): the prompt
   * (the limiter's estimate of it) and the text shown, about 4 characters a token; marked
   * as an estimate in the ledger. Never 0 for a request the provider answered. */
  #estimate(
    partial: PartialResult | undefined,
    a: Attempt | undefined,
  ): Partial<Usage> | undefined {
    if (a === undefined || partial === undefined || partial.chunks.length === 0) return undefined;
    const said = partial.usage;
    const inputTokens = said?.inputTokens || this.cost.inputTokens || 0;
    const outputTokens = said?.outputTokens || Math.ceil((partial.answer?.text.length ?? 0) / 4);
    if (inputTokens + outputTokens === 0) return undefined;
    a.usageEstimated = true;
    return { inputTokens, outputTokens };
  }

  #state(f: Failure, more: FailOptions): RetryState {
    const limits = this.#limits;
    const refused = this.#options?.retryIf;
    return {
      attempt: this.#n,
      deadline: this.deadline,
      previousDelayMs: this.#waitBefore,
      emitted: more.retry === false,
      timedOutBy: this.#attempt?.timedOut?.by,
      callerRefused: f.retryable && refused?.(f, this.#lastError) === false,
      runRefusal: limits && (limits.refuseAttempt(this.#o.clock.now()) ?? limits.refuseRetry()),
      unsafe: this.#options?.effect === "unsafe" || this.#attempt?.unsafe === true,
    };
  }

  /** What the caller sees for a reason: the abort's own reason, our timeout, or the error. */
  #errorFor(reason: GiveUpReason, error: unknown): unknown {
    if (reason === "cancelled") {
      this.#partial = undefined;
      const caller = this.#options?.signal;
      return caller?.aborted ? caller.reason : error;
    }
    const cut = this.#attempt?.timedOut;
    return cut !== undefined && cut.by === reason ? cut : error;
  }

  /** `onRetry` hears the retry; its veto gives the gates' grants back. */
  #onRetry(delayMs: number, error: unknown, f: Failure): void {
    const onRetry = this.#o.onRetry;
    if (onRetry === undefined) return;
    const event = { attempt: this.#n, error, failure: f, delayMs, ledger: this.ledger };
    if (runHook(this, "onRetry", () => onRetry(event), undefined) === false) {
      this.#o.gates.refund(this);
      this.#giveUp("vetoed", error, f);
    }
  }

  #record(
    outcome: "ok" | "failed",
    f: Failure | undefined,
    usage: Usage | undefined,
    of: Attempt | undefined = this.#attempt,
  ): number {
    const now = this.#o.clock.now();
    const started = of?.startedAt ?? now;
    const a: { -readonly [K in keyof AttemptRecord]: AttemptRecord[K] } = {
      attempt: of?.attempt ?? this.#n,
      startedAt: started,
      durationMs: now - started,
      waitMs: this.#waitBefore + (of?.heldMs ?? 0),
      outcome,
    };
    if (f) a.failure = f;
    if (usage) a.usage = usage;
    if (of?.raced !== undefined) a.hedged = of.raced;
    if (of?.usageEstimated) a.usageEstimated = true;
    if (of?.hedge) a.hedge = true;
    const answeredBy = of?.responseModel;
    if (answeredBy !== undefined) a.responseModel = answeredBy;
    const upstream = this.#options?.upstream;
    if (upstream !== undefined) a.upstream = upstream;
    if (this.#o.price !== this.ledger.price) a.price = this.#o.price;
    this.ledger.record(a);
    const w = of?.takeWatch();
    if (w) runHook(this, "observe", () => w.end(a), undefined);
    return now;
  }

  /** Throws what the caller sees: a BreakwaterError for our own reasons, else the
   * provider's own error tagged with the reason and ledger (rule 8), secrets masked. */
  #giveUp(
    reason: GiveUpReason,
    error: unknown,
    f: Failure | undefined,
    retryAfterMs?: number,
    words?: string,
  ): never {
    const ledger = this.ledger;
    const partial = this.#partial;
    if (partial !== undefined && reason !== "cancelled" && !(f && isOutputKind(f.kind)))
      reason = "stream-interrupted";
    ledger.endedAt = this.#o.clock.now();
    let thrown = error;
    if (isOwnReason(reason) || error === null || typeof error !== "object") {
      const init = { cause: error, ledger, failure: f, retryAfterMs, partial };
      const said =
        words ?? (reason === "run-deadline" ? shareWords(this.#options?.run) : undefined);
      thrown = new BreakwaterError(reason, init, said);
    } else {
      tagError(error, reason, ledger, f, partial);
    }
    scrubError(thrown); // the one place errors leave a policy (rule 10)
    const onGiveUp = this.#o.onGiveUp;
    if (onGiveUp) {
      const event = { reason, error: thrown, failure: f, ledger };
      runHook(this, "onGiveUp", () => onGiveUp(event), undefined);
    }
    const watch = this.#watch;
    if (watch !== undefined) {
      const seenAs = this.#options?.seenAs;
      const end = { ok: false as const, reason, failure: f, error: thrown, ledger, seenAs };
      runHook(this, "observe", () => watch.end(end), undefined);
    }
    throw thrown;
  }
}

/** A run's deadline reached by the call's share of it, not by the run: say which (rule 6). */
function shareWords(run: Run | undefined): string | undefined {
  const left = run?.remainingMs();
  if (left === undefined || left <= 0) return undefined;
  return `the call's share of the run's time ran out (${Math.ceil(left)} ms of the run left; new Run({ callShare }) sets the share)`;
}
