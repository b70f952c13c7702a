import { classify } from "../core/classify.ts";
import {
  BreakwaterError,
  type GiveUpReason,
  type PartialResult,
  tagError,
} from "../core/errors.ts";
import { type Failure, UPSTREAM_KINDS } from "../core/failure.ts";
import { type AttemptRecord, Ledger } from "../core/ledger.ts";
import { scrubError } from "../core/redact.ts";
import type { Usage } from "../core/usage.ts";
import type { Run } from "../run/run.ts";
import { AttemptScope } from "./attempt-scope.ts";
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

export interface FailOptions {
  usage?: Partial<Usage>;
  failure?: Failure;
  partial?: PartialResult;
  retry?: false;
  beforeWait?: () => unknown;
}

export interface CallOptions {
  signal?: AbortSignal;
  run?: Run;
  /** Narrows retry for this call: return false to refuse a retry the policy would allow
   * (e.g. a write that may have executed). It can only make the policy stricter. */
  retryIf?: (failure: Failure, error: unknown) => boolean;
}

/** Reasons the policy raises as a BreakwaterError; the rest tag the provider's own error. */
const OWN_REASONS: ReadonlySet<GiveUpReason> = new Set([
  "deadline",
  "budget",
  "retry-after-too-long",
  "circuit-open",
  "stream-interrupted",
  "attempt-timeout",
  "run-attempts",
  "run-deadline",
  "run-tokens",
  "run-retry-share",
  "run-tool-failures",
]);

const fullUsage = (u: Partial<Usage> | undefined): Usage | undefined =>
  u === undefined
    ? undefined
    : { inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0 };

/**
 * One logical call: the state of its retry loop (DESIGN rules 1, 2, 6, 8). `execute` and
 * `stream` drive it: begin an attempt, then report success or failure; `fail` either
 * waits out the backoff and returns (retry) or throws the error the caller should see.
 */
export class Call {
  #ledger: Ledger | undefined;
  readonly #startedAt: number;
  readonly #o: ResolvedOptions;
  readonly #signal: AbortSignal | undefined;
  readonly #run: Run | undefined;
  readonly #retryIf: CallOptions["retryIf"];
  readonly deadline: number;
  readonly deadlineReason: "deadline" | "run-deadline";
  #attempt = 0;
  #attemptStart = 0;
  #waitBefore = 0;
  #lastDelay = 0;
  #scope: AttemptScope | undefined;
  /** The clock reading taken at construction, reused by the first attempt (clock reads
   * cost ~50 ns on these machines and dominate the success path). */
  #startNow: number | undefined;
  #partial: PartialResult | undefined;
  #lastError: unknown;
  #lastFailure: Failure | undefined;

  constructor(o: ResolvedOptions, options?: CallOptions) {
    this.#o = o;
    this.#signal = options?.signal;
    this.#run = options?.run;
    this.#retryIf = options?.retryIf;
    const now = o.clock.now();
    this.#startNow = now;
    this.#startedAt = now;
    const own = now + o.deadlineMs;
    const runs = this.#run?.callDeadline(now) ?? Number.POSITIVE_INFINITY;
    this.deadline = Math.min(own, runs);
    this.deadlineReason = runs < own ? "run-deadline" : "deadline";
    this.#run?.addCall(this.ledger);
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

  /** Starts an attempt, or throws if the call may not make one (caller abort, run, breaker).
   * The scope it returns is also the context the operation is handed. */
  begin(): AttemptScope {
    const o = this.#o;
    const now = this.#startNow ?? o.clock.now();
    this.#startNow = undefined;
    if (this.#signal?.aborted) this.#giveUp("cancelled", this.#signal.reason, undefined);
    // Refusing a later attempt keeps the provider's last error as the cause (rule 8).
    const last = this.#lastError;
    const lastFailure = this.#lastFailure;
    const refused = this.#run?.refuseAttempt(now);
    if (refused) this.#giveUp(refused, last, lastFailure);
    if (now >= this.deadline) this.#giveUp(this.deadlineReason, last, lastFailure);
    if (o.breaker && !o.breaker.tryAcquire()) this.#giveUp("circuit-open", last, lastFailure);
    this.#attempt++;
    this.#run?.addAttempt(this.#attempt > 1);
    this.#attemptStart = now;
    const toDeadline = this.deadline - now;
    const remainingMs = Math.min(o.attemptTimeoutMs, toDeadline);
    const scope = new AttemptScope(
      o.clock,
      this.#signal,
      this.#attempt,
      this.deadline,
      remainingMs,
    );
    scope.arm(remainingMs, o.attemptTimeoutMs <= toDeadline ? "attempt" : this.deadlineReason);
    this.#scope = scope;
    return scope;
  }

  usageOf(value: unknown): Usage | undefined {
    return this.#o.usage ? fullUsage(this.#o.usage(value)) : undefined;
  }

  succeed(usage?: Partial<Usage>): void {
    const o = this.#o;
    this.#scope?.end();
    o.breaker?.onSuccess();
    o.budget?.onSuccess();
    if (this.#ledger === undefined && o.onSuccess === undefined) return;
    this.ledger.endedAt = this.#record("ok", undefined, fullUsage(usage));
    o.onSuccess?.({ attempts: this.#attempt, ledger: this.ledger });
  }

  /** Classifies the failure of the attempt that is running. */
  classify(error: unknown): Failure {
    const scope = this.#scope;
    if (scope?.callerAborted) return { kind: "cancelled", retryable: false };
    if (scope?.timedOut)
      return { kind: "timeout", retryable: true, code: `${scope.timedOut.by}_timeout` };
    const now = this.#o.clock.now();
    return this.#o.classify?.(error, now) ?? classify(error, now);
  }

  /**
   * The attempt failed. Waits and returns when the call should try again; otherwise
   * throws what the caller should see. `failure` overrides the classification (an
   * adapter's in-band error); `partial` means output already reached the consumer, so
   * giving up is a `stream-interrupted`; `retry: false` gives up whatever the failure;
   * `beforeWait` runs once the retry is decided (restart mode's onDiscard).
   */
  async fail(error: unknown, more: FailOptions = {}): Promise<void> {
    const o = this.#o;
    const scope = this.#scope;
    const f = more.failure ?? this.classify(error);
    this.#lastError = error;
    this.#lastFailure = f;
    scope?.end();
    this.#record("failed", f, fullUsage(more.usage));
    if (UPSTREAM_KINDS.has(f.kind)) o.breaker?.onFailure();
    else o.breaker?.onNeutral();
    this.#partial = more.partial;

    if (f.kind === "cancelled") {
      this.#partial = undefined;
      this.#giveUp("cancelled", this.#signal?.aborted ? this.#signal.reason : error, f);
    }
    if (more.retry === false) this.#giveUp("stream-interrupted", error, f);
    const timedOut = scope?.timedOut;
    if (timedOut?.by === "deadline" || timedOut?.by === "run-deadline")
      this.#giveUp(timedOut.by, timedOut, f);
    if (!f.retryable || this.#retryIf?.(f, error) === false)
      this.#giveUp("not-retryable", error, f);
    if (this.#attempt >= o.maxAttempts)
      this.#giveUp(timedOut ? "attempt-timeout" : "attempts-exhausted", error, f);

    const now = o.clock.now();
    let delay: number;
    const hint = f.retryAfterMs;
    if (hint !== undefined) {
      if (hint > o.retryAfterMaxMs) this.#giveUp("retry-after-too-long", error, f, hint);
      // Never earlier than asked; a little jitter on top so clients told alike spread out.
      delay = hint + o.random() * Math.min(o.retryAfterJitterMs, hint * 0.2);
    } else {
      delay = o.backoff.delay(this.#attempt, f.kind, this.#lastDelay, o.random);
    }
    if (now + delay >= this.deadline) this.#giveUp(this.deadlineReason, error, f, hint);
    if (this.#run && now + delay >= this.#run.deadline)
      this.#giveUp("run-deadline", error, f, hint);
    const refused = this.#run?.refuseAttempt(now) ?? this.#run?.refuseRetry();
    if (refused) this.#giveUp(refused, error, f);
    if (o.breaker?.state === "open") this.#giveUp("circuit-open", error, f);
    if (o.budget && !o.budget.tryAcquire()) this.#giveUp("budget", error, f);
    const event = {
      attempt: this.#attempt,
      error,
      failure: f,
      delayMs: delay,
      ledger: this.ledger,
    };
    if (o.onRetry?.(event) === false) {
      o.budget?.refund();
      this.#giveUp("vetoed", error, f);
    }
    this.#partial = undefined;
    await more.beforeWait?.();
    try {
      await o.clock.sleep(delay, this.#signal);
    } catch {
      this.#giveUp("cancelled", this.#signal?.reason, { kind: "cancelled", retryable: false });
    }
    this.#waitBefore = delay;
    this.#lastDelay = delay;
  }

  #record(
    outcome: "ok" | "failed",
    failure: Failure | undefined,
    usage: Usage | undefined,
  ): number {
    const now = this.#o.clock.now();
    const a: { -readonly [K in keyof AttemptRecord]: AttemptRecord[K] } = {
      attempt: this.#attempt,
      startedAt: this.#attemptStart,
      durationMs: now - this.#attemptStart,
      waitMs: this.#waitBefore,
      outcome,
    };
    if (failure) a.failure = failure;
    if (usage) a.usage = usage;
    this.ledger.record(a);
    return now;
  }

  #giveUp(
    reason: GiveUpReason,
    error: unknown,
    failure: Failure | undefined,
    retryAfterMs?: number,
  ): never {
    const ledger = this.ledger;
    const partial = this.#partial;
    if (partial !== undefined && reason !== "cancelled") reason = "stream-interrupted";
    ledger.endedAt = this.#o.clock.now();
    let thrown = error;
    const foreign = error !== null && typeof error === "object";
    if (OWN_REASONS.has(reason) || !foreign) {
      thrown = new BreakwaterError(reason, {
        cause: error,
        ledger,
        failure,
        ...(retryAfterMs !== undefined && { retryAfterMs }),
        ...(partial && { partial }),
      });
    } else {
      tagError(error, reason, ledger, failure);
    }
    scrubError(thrown); // secrets never leave (DESIGN rule 10): this is where errors leave
    this.#o.onGiveUp?.({ reason, error: thrown, failure, ledger });
    throw thrown;
  }
}
