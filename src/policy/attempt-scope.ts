import { type AbortWatcher, type Unwatch, watchAbort } from "../core/abort.ts";
import type { Cancel, Clock } from "../core/clock.ts";
import type { TimeoutCause } from "../core/deadline.ts";
import { AttemptTimeoutError } from "../core/errors.ts";

/**
 * One attempt's signal: aborts at its timeout, at the deadline or when the caller aborts,
 * and leaves no timer or listener behind once `end()` runs (a long-lived caller signal must
 * not collect listeners). The AbortController is made only when someone reads `signal`:
 * on the success path of a call with nothing to abort it, that is most of the overhead.
 */
export class AttemptScope implements AbortWatcher {
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** The call's deadline as a time on the policy's clock (Infinity when none). */
  readonly deadline: number;
  /** Time this attempt may take: min(attempt timeout, call deadline, run share). */
  readonly remainingMs: number;
  #controller: AbortController | undefined;
  readonly #clock: Clock;
  readonly #caller: AbortSignal | undefined;
  #cancelTimer: Cancel | undefined;
  #timedOut: AttemptTimeoutError | undefined;
  #aborted = false;
  #ended = false;
  #reason: unknown;
  #rejectRace: ((e: unknown) => void) | undefined;
  #onAbortHook: ((e: unknown) => void) | undefined;
  #unwatch: Unwatch | undefined;

  constructor(
    clock: Clock,
    caller: AbortSignal | undefined,
    attempt = 1,
    deadline = Number.POSITIVE_INFINITY,
    remainingMs = Number.POSITIVE_INFINITY,
    /** Watch the caller's signal weakly (a stream: its consumer may abandon it). */
    weak = false,
  ) {
    this.attempt = attempt;
    this.deadline = deadline;
    this.remainingMs = remainingMs;
    this.#clock = clock;
    this.#caller = caller;
    if (caller) this.#unwatch = watchAbort(caller, this, weak);
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  /** Set when one of our timers cut the attempt. */
  get timedOut(): AttemptTimeoutError | undefined {
    return this.#timedOut;
  }

  get callerAborted(): boolean {
    return this.#caller?.aborted === true;
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
    this.#cancelTimer = this.#clock.schedule(ms, () => {
      const again = recheck?.() ?? 0;
      if (again > 0) this.arm(again, by, recheck);
      else this.abortWith(new AttemptTimeoutError(by, ms));
    });
  }

  abortWith(error: AttemptTimeoutError): void {
    if (this.#aborted) return;
    this.#timedOut = error;
    this.#abort(error);
  }

  #abort(reason: unknown) {
    if (this.#aborted) return;
    this.#aborted = true;
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
    return this.#cancelTimer !== undefined || this.#caller !== undefined;
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
    if (this.#aborted) {
      p.catch(() => {});
      return Promise.reject(this.#reason);
    }
    if (this.#cancelTimer === undefined && this.#caller === undefined) return p; // nothing can abort it
    return new Promise<T>((resolve, reject) => {
      this.#rejectRace = reject;
      p.then(resolve, reject);
    });
  }

  /** The attempt is over for us (settled, or its consumer left). */
  get ended(): boolean {
    return this.#ended;
  }

  end(): void {
    this.#ended = true;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#rejectRace = undefined;
    this.#onAbortHook = undefined;
    this.#unwatch?.();
    this.#unwatch = undefined;
  }
}
