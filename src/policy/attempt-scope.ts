import type { Cancel, Clock } from "../core/clock.ts";

export type TimeoutCause =
  | "attempt"
  | "deadline"
  | "run-deadline"
  | "first-token"
  | "idle"
  | "total";

/** Our own timeout fired: the attempt was cut, which says nothing about the server. */
export class AttemptTimeoutError extends Error {
  override name = "AttemptTimeoutError";
  readonly by: TimeoutCause;
  readonly afterMs: number;

  constructor(by: TimeoutCause, afterMs: number) {
    super(`${by} timeout after ${afterMs} ms`);
    this.by = by;
    this.afterMs = afterMs;
  }
}

/**
 * One attempt's signal: aborts at its timeout, at the deadline or when the caller aborts,
 * and leaves no timer or listener behind once `end()` runs (a long-lived caller signal must
 * not collect listeners).
 */
export class AttemptScope {
  readonly #controller = new AbortController();
  readonly #clock: Clock;
  readonly #caller: AbortSignal | undefined;
  #cancelTimer: Cancel | undefined;
  #timedOut: AttemptTimeoutError | undefined;
  readonly #onCallerAbort = () => this.#controller.abort(this.#caller!.reason);

  constructor(clock: Clock, caller: AbortSignal | undefined) {
    this.#clock = clock;
    this.#caller = caller;
    if (caller) {
      if (caller.aborted) this.#controller.abort(caller.reason);
      else caller.addEventListener("abort", this.#onCallerAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Set when one of our timers cut the attempt. */
  get timedOut(): AttemptTimeoutError | undefined {
    return this.#timedOut;
  }

  get callerAborted(): boolean {
    return this.#caller?.aborted === true;
  }

  /** (Re)arms the timer: an attempt timeout, or a stream's first-token/idle timer. */
  arm(ms: number, by: TimeoutCause): void {
    this.#cancelTimer?.();
    if (ms === Number.POSITIVE_INFINITY) {
      this.#cancelTimer = undefined;
      return;
    }
    this.#cancelTimer = this.#clock.schedule(ms, () =>
      this.abortWith(new AttemptTimeoutError(by, ms)),
    );
  }

  abortWith(error: AttemptTimeoutError): void {
    if (this.#controller.signal.aborted) return;
    this.#timedOut = error;
    this.#controller.abort(error);
  }

  /** Settles with `p`, or rejects as soon as the attempt's signal aborts (an operation
   * that ignores its signal must not hold the call past its deadline). */
  race<T>(p: Promise<T>): Promise<T> {
    const signal = this.#controller.signal;
    if (signal.aborted) {
      p.catch(() => {});
      return Promise.reject(signal.reason);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      p.then(
        (v) => {
          signal.removeEventListener("abort", onAbort);
          resolve(v);
        },
        (e) => {
          signal.removeEventListener("abort", onAbort);
          reject(e);
        },
      );
    });
  }

  end(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#caller?.removeEventListener("abort", this.#onCallerAbort);
  }
}
