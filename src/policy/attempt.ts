import { type AbortWatcher, type Unwatch, watchAbort } from "../core/abort.ts";
import type { Cancel, Clock } from "../core/clock.ts";
import { attemptCause, attemptMs, type Deadline, type TimeoutCause } from "../core/deadline.ts";
import type { Effect } from "../core/effects.ts";
import { AttemptTimeoutError } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import type { Limiter } from "../core/limiter.ts";
import type { Usage } from "../core/usage.ts";
import { inAmbient, type OuterAttempt } from "./ambient.ts";
import type { AttemptWatch } from "./observer.ts";

/** How an attempt ended, as every gate it passed is told (docs/architecture.md, "The
 * grant protocol"). */
export type AttemptEnd =
  /** The upstream answered, and the answer counts. */
  | { readonly how: "ok"; readonly usage?: Partial<Usage> | undefined }
  /** The attempt failed, classified. */
  | { readonly how: "failed"; readonly failure: Failure; readonly usage?: Partial<Usage> }
  /** It was sent and ended with no verdict on the upstream: a consumer who left, a stream
   * collected unread, a hook that failed. */
  | { readonly how: "left"; readonly usage?: Partial<Usage> | undefined }
  /** It never went out (a later gate refused it, or the caller left while it waited). */
  | { readonly how: "unsent" };

/** Takes what a hook or gate supplied by the user threw: kept on the ledger and warned
 * about, it never changes the outcome (rule 12). */
export interface Reporter {
  report(hook: string, error: unknown): void;
}

/**
 * What an attempt holds from one gate it passed (the breaker's probe slot, the rate
 * limiter's permit, the admission's count). Ended exactly once, by the attempt, whichever
 * way it ends. A grant never references the attempt or its stream, so a stream collected
 * unread can still end it.
 */
export interface Grant {
  end(how: AttemptEnd, startedAt: number, reporter: Reporter): void;
}

const ABORTED = 1;
const TIMED_OUT = 2;
const ENDED = 4;

/** The grants of an attempt that passed no gate holding anything. */
export const NO_GRANTS: readonly Grant[] = Object.freeze([]);

/** What an attempt needs of its call. */
export interface AttemptOwner extends Reporter {
  readonly clock: Clock;
  /** The caller's signal. */
  readonly signal: AbortSignal | undefined;
  /** The call's deadline (rule 6). */
  readonly deadline: Deadline;
  /** Each attempt's own timeout (Infinity: none). */
  readonly attemptTimeoutMs: number;
  /** Watch the caller's signal weakly: a stream's consumer may abandon it. */
  readonly weak: boolean;
  /** The policy's rate limiter, for a layer under the attempt to tell what it heard. */
  readonly limiter?: Limiter | undefined;
}

/** Ends every grant in `grants` once: what an attempt, or a stream collected unread, runs. */
export function endGrants(
  grants: readonly Grant[],
  how: AttemptEnd,
  startedAt: number,
  reporter: Reporter,
): void {
  for (let i = 0; i < grants.length; i++) grants[i]!.end(how, startedAt, reporter);
}

/**
 * One attempt of a call: its scope (one signal, one timer), its start, the observer's
 * watch and one grant from each gate it passed. `end(how)` releases all of it exactly
 * once, whichever way the attempt ends (rule 12): settled, cut by a timer or the caller, a
 * consumer who left. It is also the context the operation is handed (`AttemptContext`).
 *
 * The AbortController is made only when someone reads `signal`: on the success path of a
 * call with nothing to abort it, that is most of the overhead.
 */
export class Attempt implements AbortWatcher, OuterAttempt {
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** The call's deadline as a time on the policy's clock (Infinity when none). */
  readonly deadline: number;
  /** Time this attempt may take: min(attempt timeout, call deadline, run share). */
  readonly remainingMs: number;
  /** When it started, on the policy's clock. */
  readonly startedAt: number;
  /** Sent while an earlier attempt of the call was still in flight (rule 21). */
  readonly hedge: boolean;
  /** How it came out of a hedge race, if it was in one. */
  raced: "won" | "lost" | undefined;
  #owner: AttemptOwner;
  #grants: readonly Grant[];
  #watch: AttemptWatch | undefined;
  #controller: AbortController | undefined;
  #cancelTimer: Cancel | undefined;
  /** ABORTED, TIMED_OUT (one of our timers cut it) and ENDED, as bits. */
  #state = 0;
  /** Why it aborted: the caller's reason, or our AttemptTimeoutError. */
  #reason: unknown;
  #rejectRace: ((e: unknown) => void) | undefined;
  #onAbortHook: ((e: unknown) => void) | undefined;
  #unwatch: Unwatch | undefined;

  /** Attempt `n` of `owner`'s call, started at `startedAt` with the grants of the gates it
   * passed; its window is its own timeout or what is left of the deadline (rule 6). */
  constructor(
    owner: AttemptOwner,
    n: number,
    startedAt: number,
    grants: readonly Grant[],
    hedge = false,
  ) {
    this.attempt = n;
    this.startedAt = startedAt;
    this.hedge = hedge;
    const deadline = owner.deadline;
    this.deadline = deadline.at;
    this.#owner = owner;
    this.#grants = grants;
    const caller = owner.signal;
    if (caller !== undefined) this.#unwatch = watchAbort(caller, this, owner.weak);
    const ms = attemptMs(startedAt, owner.attemptTimeoutMs, deadline);
    this.remainingMs = ms;
    if (ms !== Number.POSITIVE_INFINITY)
      this.arm(ms, attemptCause(startedAt, owner.attemptTimeoutMs, deadline));
  }

  /** The model that answered, as the answer names it. */
  responseModel: string | undefined;

  answeredBy(model: string): void {
    if (typeof model === "string" && model !== "") this.responseModel = model;
  }

  /** A call takes over an attempt begun without one (the lean path of `execute`, which
   * makes its Call only when the first attempt fails). Same clock, signal and deadline. */
  adopt(owner: AttemptOwner): void {
    this.#owner = owner;
  }

  /** The grants this attempt holds until it ends (a stream hands them to its cleanup for
   * the case it is collected unread). */
  get grants(): readonly Grant[] {
    return this.#grants;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#state & ABORTED) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return (this.#state & ABORTED) !== 0;
  }

  /** Set when one of our timers cut the attempt. */
  get timedOut(): AttemptTimeoutError | undefined {
    return this.#state & TIMED_OUT ? (this.#reason as AttemptTimeoutError) : undefined;
  }

  get callerAborted(): boolean {
    return this.#owner.signal?.aborted === true;
  }

  /** The attempt is over for us (ended, or its consumer left). */
  get ended(): boolean {
    return (this.#state & ENDED) !== 0;
  }

  /** Watched by the observer: runs the operation in its context, hears first content. */
  watch(w: AttemptWatch | undefined): void {
    this.#watch = w;
  }

  /** Hands the observer's watch over once the ledger recorded the attempt. */
  takeWatch(): AttemptWatch | undefined {
    const w = this.#watch;
    this.#watch = undefined;
    return w;
  }

  /** Runs the attempt's operation, handed this attempt as its context: inside the
   * observer's context when one watches (so the SDK's HTTP spans nest under it), and as
   * the ambient attempt, so a wrapped client it calls sends as this attempt (rule 15). */
  run<T>(operation: (context: this) => T): T {
    const w = this.#watch;
    return w === undefined ? inAmbient(this, operation) : w.run(() => inAmbient(this, operation));
  }

  get limiter(): Limiter | undefined {
    return this.#owner.limiter;
  }

  /** What layers under this attempt said they spent (a wrapped client's request). */
  spent: { inputTokens: number; outputTokens: number } | undefined;

  /** Its usage is breakwater's estimate: the provider said nothing of it. */
  usageEstimated = false;

  /** How long it waited at the gates before it began (the rate limiter's queue or hold):
   * set only on an attempt that waited (declared, so the success path stores nothing). */
  declare heldMs: number | undefined;

  /** A request sent under this attempt changes state on the server (rule 20). */
  unsafe = false;

  sends(effect: Effect): void {
    if (effect === "unsafe") this.unsafe = true;
  }

  spend(usage: Partial<Usage>): void {
    const s = (this.spent ??= { inputTokens: 0, outputTokens: 0 });
    s.inputTokens += usage.inputTokens ?? 0;
    s.outputTokens += usage.outputTokens ?? 0;
  }

  /** A stream's first content came (for the observer's time to first token). */
  firstContent(): void {
    const w = this.#watch;
    if (w?.firstContent === undefined) return;
    try {
      w.firstContent();
    } catch (error) {
      this.#owner.report("observe", error);
    }
  }

  #answering: (() => void) | undefined;
  #answered = false;

  /** The answer began (a JSON answer's headers came): a hedge race is decided for it. */
  answering(): void {
    if (this.#answered) return;
    this.#answered = true;
    const hear = this.#answering;
    this.#answering = undefined;
    hear?.();
  }

  /** Sets the one callback `answering` runs (a hedge race listening); an answer that
   * began already is heard at once. */
  onAnswering(hear: (() => void) | undefined): void {
    if (this.#answered) hear?.();
    else this.#answering = hear;
  }

  /** In a hedge race: `cancel` may cut it, so `race` always races. */
  racing = false;

  /** Cuts the attempt for a reason of the call's own (a hedge race it lost): its request
   * is aborted now, not on the next turn of the loop, so its socket closes at once. */
  cancel(reason: unknown): void {
    if (this.#state & ABORTED) return;
    this.#abort(reason);
    this.#controller?.abort(reason);
  }

  /** (Re)arms the one timer: an attempt timeout, a deadline, or a stream's watchdog.
   * When it fires, `recheck` may return a positive number of ms to wait again instead
   * (an idle timer that saw progress since it was armed). */
  arm(ms: number, by: TimeoutCause, recheck?: () => number): void {
    this.#cancelTimer?.();
    if (ms === Number.POSITIVE_INFINITY) {
      this.#cancelTimer = undefined;
      return;
    }
    this.#cancelTimer = this.#owner.clock.schedule(ms, () => {
      const again = recheck?.() ?? 0;
      if (again > 0) this.arm(again, by, recheck);
      else this.abortWith(new AttemptTimeoutError(by, ms));
    });
  }

  abortWith(error: AttemptTimeoutError): void {
    if (this.#state & ABORTED) return;
    this.#state |= TIMED_OUT;
    this.#abort(error);
  }

  #abort(reason: unknown) {
    if (this.#state & ABORTED) return;
    this.#state |= ABORTED;
    this.#reason = reason;
    // Settle our side first, and let the operation's own teardown (an HTTP client
    // aborting its request can take most of a millisecond) run after the caller has
    // its answer.
    this.#rejectRace?.(reason);
    this.#onAbortHook?.(reason);
    const controller = this.#controller;
    if (controller) setImmediate(() => controller.abort(reason));
  }

  /** True when something (a timer, the caller's signal) can abort this attempt. */
  get abortable(): boolean {
    return this.#cancelTimer !== undefined || this.#owner.signal !== undefined;
  }

  /** The caller's signal aborted. */
  onAbort(reason: unknown): void {
    this.#abort(reason);
  }

  /** Sets the one callback run when the attempt aborts (a stream's pending read). */
  setAbortHook(hook: (reason: unknown) => void): void {
    this.#onAbortHook = hook;
  }

  /** Settles with `p`, or rejects as soon as the attempt aborts (an operation that
   * ignores its signal must not hold the call past its deadline). */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.#state & ABORTED) {
      p.catch(() => {});
      return Promise.reject(this.#reason);
    }
    if (this.#cancelTimer === undefined && this.#owner.signal === undefined && !this.racing)
      return p; // nothing can abort it
    return new Promise<T>((resolve, reject) => {
      this.#rejectRace = reject;
      p.then(resolve, reject);
    });
  }

  /** Stops the timer and the caller's listener; the grants stay until `end`. */
  close(): void {
    this.#state |= ENDED;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#rejectRace = undefined;
    this.#onAbortHook = undefined;
    this.#answering = undefined;
    this.#unwatch?.();
    this.#unwatch = undefined;
  }

  /** The attempt is over: its timer, listener and every grant are released, once. */
  end(how: AttemptEnd): void {
    this.close();
    const grants = this.#grants;
    if (grants.length === 0) return;
    this.#grants = NO_GRANTS;
    endGrants(grants, how, this.startedAt, this.#owner);
  }
}
