import { classify } from "../core/classify.ts";
import { attemptCause, attemptMs, callDeadline, type Deadline } from "../core/deadline.ts";
import { decide, type RetryState } from "../core/decide.ts";
import {
  BreakwaterError,
  type GiveUpReason,
  isOwnReason,
  type PartialResult,
  tagError,
} from "../core/errors.ts";
import { type Failure, failure, isOutputKind, KINDS } from "../core/failure.ts";
import { type AttemptRecord, Ledger } from "../core/ledger.ts";
import { type Cost, type Permit, RateLimitWaitError } from "../core/limiter.ts";
import { scrubError } from "../core/redact.ts";
import { isA } from "../core/safe.ts";
import type { Usage } from "../core/usage.ts";
import { opt, type Rule } from "../core/validate.ts";
import { isRun, partsOf } from "../run/internal.ts";
import type { RunLimits } from "../run/limits.ts";
import type { Run } from "../run/run.ts";
import { AttemptScope } from "./attempt-scope.ts";
import { reportHookError, runHook } from "./hooks.ts";
import { BreakerLease, type BreakerVerdict } from "./lease.ts";
import type { AttemptWatch, CallInfo, CallWatch, Observer } from "./observer.ts";
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
  ledger: opt.any<Ledger>((x) => isA(x, Ledger), "a Ledger"),
  upstream: opt.str(),
  cost: opt.object({
    inputTokens: opt.num(0, Number.POSITIVE_INFINITY, 0),
    outputTokens: opt.num(0, Number.POSITIVE_INFINITY, 0),
  }),
  priority: opt.any<number>((x) => Number.isFinite(x), "a finite number"),
} satisfies Record<keyof CallOptions, Rule<unknown>>;

const CANCELLED = failure("cancelled");
const NO_COST: Cost = {};
const NO_PERMIT: Permit = { settle: () => {}, cancel: () => {} };
const UNKNOWN = failure("unknown");

const fullUsage = (u: Partial<Usage> | undefined): Usage | undefined =>
  u === undefined
    ? undefined
    : { inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0 };

/**
 * One logical call: the state of its retry loop. `execute` and `stream` drive it: begin an
 * attempt, then report success or failure. On failure the call asks `decide` for a verdict
 * and performs it: waits out the backoff and returns (retry), or throws what the caller
 * should see (docs/architecture.md, rules 1, 2, 6 and 8).
 */
export class Call {
  readonly deadline: Deadline;
  readonly #o: ResolvedOptions;
  readonly #signal: AbortSignal | undefined;
  readonly #limits: RunLimits | undefined;
  readonly #retryIf: CallOptions["retryIf"];
  readonly #classify: CallOptions["classify"];
  /** The rules decide reads: the policy's, with this call's own attempt cap if it has one. */
  readonly #rules: ResolvedOptions | (ResolvedOptions & { maxAttempts: number });
  readonly #upstream: string | undefined;
  readonly #startedAt: number;
  /** Whether anything can refuse an attempt (spares the checks on the common path). */
  readonly #gated: boolean;
  #ledger: Ledger | undefined;
  #attempt = 0;
  #attemptStart = 0;
  #waitBefore = 0;
  #scope: AttemptScope | undefined;
  /** The clock reading taken at construction, reused by the first attempt (clock reads
   * cost ~50 ns and dominate the success path). */
  #startNow: number | undefined;
  #partial: PartialResult | undefined;
  #lastError: unknown;
  #lastFailure: Failure | undefined;
  /** The breaker's grant for the attempt in flight, until it hears how it ended. */
  #lease: BreakerLease | undefined;
  /** The policy's observer's watch on this call, and on its attempt in flight. */
  readonly #watch: CallWatch | undefined;
  #attemptWatch: AttemptWatch | undefined;
  /** The rate limiter's grant for the attempt about to start or in flight. */
  #permit: Permit | undefined;
  readonly #options: CallOptions | undefined;

  constructor(o: ResolvedOptions, options?: CallOptions, stream = false) {
    this.#o = o;
    this.#options = options;
    this.#signal = options?.signal;
    this.#limits = options?.run === undefined ? undefined : partsOf(options.run)?.limits;
    this.#retryIf = options?.retryIf;
    this.#classify = options?.classify;
    this.#upstream = options?.upstream;
    this.#ledger = options?.ledger;
    const cap = options?.maxAttempts;
    this.#rules = cap === undefined || cap >= o.maxAttempts ? o : { ...o, maxAttempts: cap };
    const now = o.clock.now();
    this.#startNow = now;
    this.#startedAt = now;
    const runAllows = this.#limits?.callDeadline(now) ?? Number.POSITIVE_INFINITY;
    const given = options?.deadlineAt ?? Number.POSITIVE_INFINITY;
    this.deadline = callDeadline(now, Math.min(o.deadlineMs, given - now), runAllows);
    this.#gated =
      this.#signal !== undefined ||
      this.#limits !== undefined ||
      o.breaker !== undefined ||
      this.deadline.at !== Number.POSITIVE_INFINITY;
    if (options?.ledger === undefined) this.#limits?.addCall(this.ledger);
    if (o.observe !== undefined)
      this.#watch = watchCall(this, o.observe, {
        stream,
        model: o.model,
        upstream: this.#upstream,
      });
  }

  /** Made on first use: a call that succeeds with nobody watching (no run, no onSuccess,
   * no stream) never builds one, which keeps the success path cheap. */
  get ledger(): Ledger {
    this.#ledger ??= new Ledger(this.#startedAt, this.#o.model, this.#o.price);
    return this.#ledger;
  }

  get attempt(): number {
    return this.#attempt;
  }

  /**
   * Takes the rate limiter's permit for the next attempt (rule 16): undefined when there
   * is no limiter or room now; else a wait, cancellable and within the deadline, that
   * gives up with `rate-limit-wait` when the deadline cannot be met.
   */
  gate(leaving?: () => AbortSignal): Promise<void> | undefined {
    const limiter = this.#o.limiter;
    if (limiter === undefined) return undefined;
    const o = this.#options;
    const cost = o?.cost ?? NO_COST;
    const group = o?.run?.root;
    // A limiter that throws lets the call go: a broken gate must not stop all traffic.
    const take = () => limiter.tryAcquire(cost, group);
    this.#permit = runHook(this, "limiter.tryAcquire", take, NO_PERMIT);
    if (this.#permit !== undefined) return undefined;
    this.#startNow = undefined; // the attempt starts after the wait
    const priority = o?.priority ?? o?.run?.priority ?? 0;
    // The caller's abort, and (a stream) the consumer leaving, both end the wait.
    const left = leaving?.();
    const signal =
      left === undefined
        ? this.#signal
        : this.#signal === undefined
          ? left
          : AbortSignal.any([this.#signal, left]);
    const wait = { deadlineAt: this.deadline.at, signal, priority, group };
    return Promise.resolve()
      .then(() => limiter.acquire(cost, wait))
      .then(
        (p) => void (this.#permit = p),
        (e: unknown) => this.#refused(e, left),
      );
  }

  /** The rate limiter's permit for the attempt about to start or in flight. */
  get permit(): Permit | undefined {
    return this.#permit;
  }

  /** The limiter would not grant a permit: the caller left, or the wait is too long
   * (`rate-limit-wait`); a limiter that failed otherwise lets the call go. */
  #refused(e: unknown, left?: AbortSignal): void {
    if (this.#signal?.aborted) this.#giveUp("cancelled", this.#signal.reason, CANCELLED);
    if (left?.aborted) this.#giveUp("cancelled", left.reason, CANCELLED);
    if (!isA(e, RateLimitWaitError)) {
      reportHookError(this, "limiter.acquire", e);
      return;
    }
    this.#giveUp("rate-limit-wait", this.#lastError ?? e, this.#lastFailure, e.waitMs);
  }

  /** Ends the attempt's claim on the rate limiter: settled with what it spent, or (never
   * sent) cancelled. */
  #endPermit(how: "settle" | "cancel", usage?: Partial<Usage>): void {
    const p = this.#permit;
    if (p === undefined) return;
    this.#permit = undefined;
    runHook(
      this,
      `limiter.${how}`,
      () => (how === "cancel" ? p.cancel() : p.settle(usage)),
      undefined,
    );
  }

  /** Starts an attempt, or throws if the call may not make one (caller abort, run,
   * deadline, breaker). The scope it returns is also the context the operation is handed. */
  begin(weak = false): AttemptScope {
    const o = this.#o;
    const now = this.#startNow ?? o.clock.now();
    this.#startNow = undefined;
    if (this.#gated) this.#refuseAttempt(now);
    this.#attempt++;
    this.#limits?.addAttempt(this.#attempt > 1);
    this.#attemptStart = now;
    const ms = attemptMs(now, o.attemptTimeoutMs, this.deadline);
    const scope = new AttemptScope(
      o.clock,
      this.#signal,
      this.#attempt,
      this.deadline.at,
      ms,
      weak,
    );
    if (ms !== Number.POSITIVE_INFINITY)
      scope.arm(ms, attemptCause(now, o.attemptTimeoutMs, this.deadline));
    this.#scope = scope;
    if (this.#watch !== undefined)
      this.#attemptWatch = watchAttempt(this, this.#watch, this.#attempt);
    return scope;
  }

  /** Whether an observer watches this call. */
  get observed(): boolean {
    return this.#watch !== undefined;
  }

  /** Runs the attempt's operation: inside the observer's context when one watches. */
  run<T>(fn: () => T): T {
    const w = this.#attemptWatch;
    return w === undefined ? fn() : w.run(fn);
  }

  /** A stream's first content came (for the observer's time to first token). */
  firstContent(): void {
    const w = this.#attemptWatch;
    if (w?.firstContent) runHook(this, "observe", () => w.firstContent!(), undefined);
  }

  /** Gives up before an attempt when the caller, the run, the deadline or the breaker say
   * no; a later attempt refused keeps the provider's last error as the cause (rule 8). */
  #refuseAttempt(now: number): void {
    if (this.#signal?.aborted) this.#giveUp("cancelled", this.#signal.reason, undefined);
    const last = this.#lastError;
    const lastFailure = this.#lastFailure;
    const refused = this.#limits?.refuseAttempt(now);
    if (refused) this.#giveUp(refused, last, lastFailure);
    if (now >= this.deadline.at) this.#giveUp(this.deadline.by, last, lastFailure);
    const breaker = this.#o.breaker;
    if (breaker === undefined) return;
    // A breaker that throws lets the attempt go: a broken gate must not stop all traffic.
    if (!runHook(this, "breaker.tryAcquire", () => breaker.tryAcquire(), true))
      this.#giveUp("circuit-open", last, lastFailure);
    this.#lease = new BreakerLease(breaker);
  }

  /** The breaker's hold on the attempt in flight, if any (a stream hands it to its
   * garbage-collection cleanup). */
  get lease(): BreakerLease | undefined {
    return this.#lease;
  }

  /** The attempt ends with no verdict on the upstream (a consumer left, a hook failed):
   * what it held is released, nothing is decided (`sent: false`: it never went out, so
   * the rate limiter gets all of it back). */
  abandon(sent = true): void {
    this.#scope?.end();
    this.#endPermit(sent ? "settle" : "cancel");
    this.#release("onNeutral");
  }

  #release(verdict: BreakerVerdict): void {
    const lease = this.#lease;
    if (lease === undefined || !lease.held) return;
    const error = lease.release(verdict);
    if (error !== undefined) reportHookError(this, `breaker.${verdict}`, error);
  }

  /** Reads usage from a result with `read` (or the policy's reader); a reader that
   * throws reads as no usage. */
  usageOf(value: unknown, read = this.#o.usage): Usage | undefined {
    if (read === undefined) return undefined;
    return fullUsage(runHook(this, "usage", () => read(value), undefined));
  }

  /** The attempt succeeded (`upstream`: "neutral" when it ended before the upstream
   * showed anything, e.g. a consumer who left before the first content chunk). */
  succeed(usage?: Partial<Usage>, upstream: "onSuccess" | "onNeutral" = "onSuccess"): void {
    const o = this.#o;
    this.#scope?.end();
    if (this.#permit !== undefined) this.#endPermit("settle", usage);
    if (this.#lease !== undefined) this.#release(upstream);
    if (o.budget !== undefined) {
      try {
        o.budget.onSuccess(this.#attemptStart);
      } catch (error) {
        reportHookError(this, "budget.onSuccess", error);
      }
    }
    if (this.#ledger === undefined && o.onSuccess === undefined && this.#watch === undefined)
      return;
    this.ledger.endedAt = this.#record("ok", undefined, fullUsage(usage));
    const event = { attempts: this.#attempt, ledger: this.ledger };
    if (o.onSuccess) runHook(this, "onSuccess", () => o.onSuccess!(event), undefined);
    const watch = this.#watch;
    if (watch)
      runHook(this, "observe", () => watch.end({ ok: true, ledger: this.ledger }), undefined);
  }

  /** Classifies the failure of the attempt that is running: our own cuts first (rule 3). */
  classify(error: unknown): Failure {
    const scope = this.#scope;
    if (scope?.callerAborted) return CANCELLED;
    if (scope?.timedOut) return failure("timeout", { code: `${scope.timedOut.by}_timeout` });
    const now = this.#o.clock.now();
    const own = this.#classify;
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
    if (f.kind === "cancelled" && f.status === undefined && scope && !scope.aborted && !scope.ended)
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
    this.#admit(verdict.delayMs, error, f);
    const watch = this.#watch;
    if (watch) {
      const why = f.retryAfterMs === undefined ? "backoff" : "retry-after";
      runHook(this, "observe", () => watch.wait(verdict.delayMs, why, f), undefined);
    }
    this.#partial = undefined;
    await this.#beforeWait(more.beforeWait);
    try {
      await this.#o.clock.sleep(verdict.delayMs, this.#signal);
    } catch {
      this.#giveUp("cancelled", this.#signal?.reason, CANCELLED);
    }
    this.#waitBefore = verdict.delayMs;
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

  /** Books the failed attempt: classified, in the ledger, told to the breaker and the
   * admission. Synchronous, so an attempt cut while nobody reads is settled at once. */
  settle(error: unknown, more: FailOptions = {}): Failure {
    const f = more.failure ?? this.classify(error);
    this.#lastError = error;
    this.#lastFailure = f;
    this.#scope?.end();
    this.#limit(f, more.usage);
    this.#record("failed", f, fullUsage(more.usage));
    this.#release(KINDS[f.kind].upstream ? "onFailure" : "onNeutral");
    const budget = this.#o.budget;
    const at = this.#attemptStart;
    if (budget?.onFailure)
      runHook(this, "budget.onFailure", () => budget.onFailure!(f, at), undefined);
    this.#partial = more.partial;
    return f;
  }

  /** A failed attempt's spend goes back to the limiter; a 429 with a wait holds
   * everyone sharing the limiter until it passes. */
  #limit(f: Failure, usage: Partial<Usage> | undefined): void {
    this.#endPermit("settle", usage ?? {});
    const limiter = this.#o.limiter;
    if (limiter !== undefined && f.kind === "rate_limited" && f.retryAfterMs !== undefined) {
      const ms = f.retryAfterMs;
      runHook(this, "limiter.hold", () => limiter.hold(ms), undefined);
    }
  }

  #state(f: Failure, more: FailOptions): RetryState {
    const limits = this.#limits;
    return {
      attempt: this.#attempt,
      deadline: this.deadline,
      previousDelayMs: this.#waitBefore,
      emitted: more.retry === false,
      timedOutBy: this.#scope?.timedOut?.by,
      callerRefused: f.retryable && this.#retryIf?.(f, this.#lastError) === false,
      runRefusal: limits && (limits.refuseAttempt(this.#o.clock.now()) ?? limits.refuseRetry()),
    };
  }

  /** What the caller sees for a reason: the abort's own reason, our timeout, or the error. */
  #errorFor(reason: GiveUpReason, error: unknown): unknown {
    if (reason === "cancelled") {
      this.#partial = undefined;
      return this.#signal?.aborted ? this.#signal.reason : error;
    }
    const cut = this.#scope?.timedOut;
    return cut !== undefined && cut.by === reason ? cut : error;
  }

  /** Asks the shared gates for the retry the rules allow: the breaker must not be open,
   * the budget must grant it, and `onRetry` must not veto it. */
  #admit(delayMs: number, error: unknown, f: Failure): void {
    const o = this.#o;
    const { breaker, budget, onRetry } = o;
    const ledger = this.ledger;
    if (breaker && runHook(this, "breaker.state", () => breaker.state, "closed") === "open")
      this.#giveUp("circuit-open", error, f);
    // An admission that throws refuses: when in doubt, protect the upstream.
    if (budget && !runHook(this, "budget.tryAcquire", () => budget.tryAcquire(f), false))
      this.#giveUp("budget", error, f);
    const event = { attempt: this.#attempt, error, failure: f, delayMs, ledger };
    if (onRetry && runHook(this, "onRetry", () => onRetry(event), undefined) === false) {
      if (budget?.refund) runHook(this, "budget.refund", () => budget.refund!(), undefined);
      this.#giveUp("vetoed", error, f);
    }
  }

  #record(outcome: "ok" | "failed", f: Failure | undefined, usage: Usage | undefined): number {
    const now = this.#o.clock.now();
    const a: { -readonly [K in keyof AttemptRecord]: AttemptRecord[K] } = {
      attempt: this.#attempt,
      startedAt: this.#attemptStart,
      durationMs: now - this.#attemptStart,
      waitMs: this.#waitBefore,
      outcome,
    };
    if (f) a.failure = f;
    if (usage) a.usage = usage;
    if (this.#upstream !== undefined) a.upstream = this.#upstream;
    if (this.#o.price !== this.ledger.price) a.price = this.#o.price;
    this.ledger.record(a);
    const w = this.#attemptWatch;
    this.#attemptWatch = undefined;
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
  ): never {
    this.#endPermit("cancel"); // held only by an attempt refused before it was sent
    const ledger = this.ledger;
    const partial = this.#partial;
    if (partial !== undefined && reason !== "cancelled" && !(f && isOutputKind(f.kind)))
      reason = "stream-interrupted";
    ledger.endedAt = this.#o.clock.now();
    let thrown = error;
    if (isOwnReason(reason) || error === null || typeof error !== "object") {
      const init = { cause: error, ledger, failure: f, retryAfterMs, partial };
      thrown = new BreakwaterError(reason, init);
    } else {
      tagError(error, reason, ledger, f, partial);
    }
    scrubError(thrown); // the one place errors leave a policy (rule 10)
    const onGiveUp = this.#o.onGiveUp;
    if (onGiveUp)
      runHook(
        this,
        "onGiveUp",
        () => onGiveUp({ reason, error: thrown, failure: f, ledger }),
        undefined,
      );
    this.#endWatch(reason, thrown, f);
    throw thrown;
  }

  /** Tells the observer how the call ended without a value; an attempt refused before it
   * began was never watched. */
  #endWatch(reason: GiveUpReason, error: unknown, failure: Failure | undefined): void {
    const watch = this.#watch;
    if (watch === undefined) return;
    const ledger = this.ledger;
    runHook(
      this,
      "observe",
      () => watch.end({ ok: false, reason, failure, error, ledger }),
      undefined,
    );
  }
}

/** Asks the observer to watch a call; one that throws watches nothing. */
function watchCall(call: Call, observer: Observer, info: CallInfo) {
  return runHook(call, "observe", () => observer.call(info), undefined);
}

/** The watch on one attempt; an observer that throws leaves it unwatched. */
function watchAttempt(call: Call, watch: CallWatch, n: number): AttemptWatch | undefined {
  return runHook(call, "observe", () => watch.attempt(n), undefined);
}
