import { type Clock, systemClock } from "./clock.ts";
import { validator } from "./validate.ts";

export type BreakerState = "closed" | "open" | "half-open";

export interface CircuitBreakerOptions {
  /** Opens after this many failures in a row. Default 5. */
  consecutiveFailures?: number;
  /** Opens when the failure share over the window reaches this (0..1]. Default 0.5. */
  failureRatio?: number;
  /** The ratio counts only once the window holds this many outcomes. Default 20. */
  minimumThroughput?: number;
  /** The sliding window for the ratio. Default 30 000 ms. */
  windowMs?: number;
  /** How long it stays open before letting probes through. Default 5 000 ms. */
  openMs?: number;
  /** Probes allowed at once while half-open. Default 1. */
  halfOpenProbes?: number;
  clock?: Clock;
  onStateChange?: (state: BreakerState) => void;
}

const SLOTS = 10;

/**
 * A circuit breaker that sits outside the retry loop: while open, calls fail fast with
 * reason `circuit-open` and spend no attempt and no budget. It opens on consecutive
 * failures or on a failure ratio over a sliding window (ten time slots), and closes
 * again after a successful half-open probe.
 */
export class CircuitBreaker {
  readonly options: Readonly<Required<Omit<CircuitBreakerOptions, "clock" | "onStateChange">>>;
  readonly #clock: Clock;
  readonly #onStateChange: ((s: BreakerState) => void) | undefined;
  #state: BreakerState = "closed";
  #streak = 0;
  #openedAt = 0;
  #probes = 0;
  // Sliding window: SLOTS buckets of windowMs / SLOTS each.
  readonly #slotStart = new Array<number>(SLOTS).fill(Number.NEGATIVE_INFINITY);
  readonly #ok = new Array<number>(SLOTS).fill(0);
  readonly #bad = new Array<number>(SLOTS).fill(0);

  constructor(options: CircuitBreakerOptions = {}) {
    const v = validator("CircuitBreaker");
    v.known("", options as Record<string, unknown>, [
      "consecutiveFailures",
      "failureRatio",
      "minimumThroughput",
      "windowMs",
      "openMs",
      "halfOpenProbes",
      "clock",
      "onStateChange",
    ]);
    this.options = Object.freeze({
      consecutiveFailures: v.int("consecutiveFailures", options.consecutiveFailures ?? 5, 1, true),
      failureRatio: v.num("failureRatio", options.failureRatio ?? 0.5, 0.001, 1),
      minimumThroughput: v.int("minimumThroughput", options.minimumThroughput ?? 20, 1),
      windowMs: v.ms("windowMs", options.windowMs ?? 30_000),
      openMs: v.ms("openMs", options.openMs ?? 5_000),
      halfOpenProbes: v.int("halfOpenProbes", options.halfOpenProbes ?? 1, 1),
    });
    this.#clock = options.clock ?? systemClock;
    this.#onStateChange =
      options.onStateChange === undefined
        ? undefined
        : v.fn("onStateChange", options.onStateChange);
  }

  get state(): BreakerState {
    if (this.#state === "open" && this.#clock.now() - this.#openedAt >= this.options.openMs) {
      this.#set("half-open");
    }
    return this.#state;
  }

  /** Asks to send one request. False means fail fast: the breaker is open (or probing). */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === "closed") return true;
    if (state === "open") return false;
    if (this.#probes >= this.options.halfOpenProbes) return false;
    this.#probes++;
    return true;
  }

  onSuccess(): void {
    this.#streak = 0;
    const i = this.#slot();
    this.#ok[i] = this.#ok[i]! + 1;
    if (this.#state === "half-open") {
      this.#probes = Math.max(0, this.#probes - 1);
      this.#resetWindow();
      this.#set("closed");
    }
  }

  onFailure(): void {
    this.#streak++;
    const i = this.#slot();
    this.#bad[i] = this.#bad[i]! + 1;
    if (this.#state === "half-open") {
      this.#probes = Math.max(0, this.#probes - 1);
      this.#open();
      return;
    }
    if (
      this.#state === "closed" &&
      (this.#streak >= this.options.consecutiveFailures || this.#ratioTripped())
    ) {
      this.#open();
    }
  }

  /** A request that was let through but ended without a verdict on the upstream
   * (a 400, a cancellation): frees its probe slot without moving the state. */
  onNeutral(): void {
    if (this.#state === "half-open") this.#probes = Math.max(0, this.#probes - 1);
  }

  #open() {
    this.#openedAt = this.#clock.now();
    this.#probes = 0;
    this.#set("open");
  }

  #set(state: BreakerState) {
    if (this.#state === state) return;
    this.#state = state;
    this.#onStateChange?.(state);
  }

  #ratioTripped(): boolean {
    const now = this.#clock.now();
    let ok = 0;
    let bad = 0;
    for (let i = 0; i < SLOTS; i++) {
      if (now - this.#slotStart[i]! < this.options.windowMs) {
        ok += this.#ok[i]!;
        bad += this.#bad[i]!;
      }
    }
    const total = ok + bad;
    return total >= this.options.minimumThroughput && bad / total >= this.options.failureRatio;
  }

  /** The index of the current time slot, cleared when it is reused. */
  #slot(): number {
    const width = this.options.windowMs / SLOTS;
    const n = Math.floor(this.#clock.now() / width);
    const i = n % SLOTS;
    if (this.#slotStart[i] !== n * width) {
      this.#slotStart[i] = n * width;
      this.#ok[i] = 0;
      this.#bad[i] = 0;
    }
    return i;
  }

  #resetWindow() {
    this.#slotStart.fill(Number.NEGATIVE_INFINITY);
    this.#streak = 0;
  }
}
