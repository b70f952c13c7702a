import { type Clock, systemClock } from "./clock.ts";
import { opt, parseOptions } from "./validate.ts";

/** Closed: calls pass. Open: calls fail fast. Half-open: a few probes test the upstream. */
export type BreakerState = "closed" | "open" | "half-open";

/**
 * A circuit breaker as the policy uses it (docs/architecture.md, rule 5): asked before every
 * attempt, told how each granted attempt ended. Every `tryAcquire` that returned true is
 * followed by exactly one of `onSuccess`, `onFailure` or `onNeutral`.
 */
export interface Breaker {
  /** Asks to send one attempt. False fails the call fast with `circuit-open`. */
  tryAcquire(): boolean;
  /** The attempt succeeded: the upstream is healthy. */
  onSuccess(): void;
  /** The attempt failed in a way that says the upstream is unhealthy. */
  onFailure(): void;
  /** The attempt ended with no verdict on the upstream (a 400, a cancellation). */
  onNeutral(): void;
  /** "open" also refuses retries of calls already running. */
  readonly state: BreakerState;
  /** While open: how long until it lets a probe through, in ms (undefined when it cannot
   * say). A call it refuses carries this wait on its `circuit-open` error, for whoever
   * calls again: a durable engine waits it in its own timer. */
  retryInMs?(): number | undefined;
}

/** What `CircuitBreaker.toJSON()` saves: enough to restore it in another process. */
export interface BreakerSnapshot {
  readonly state: BreakerState;
  /** When it opened, on the breaker's clock (systemClock: epoch milliseconds). */
  readonly openedAt: number;
  /** Failures in a row. */
  readonly streak: number;
  /** The sliding window: each slot's start time, successes and failures. */
  readonly slots: readonly (readonly [start: number, ok: number, bad: number])[];
}

/** Options of a `CircuitBreaker`. */
export interface CircuitBreakerOptions {
  /** Opens after this many failures in a row. @default 5 */
  consecutiveFailures?: number;
  /** Opens when the failure share over the window reaches this (0..1]. @default 0.5 */
  failureRatio?: number;
  /** The ratio counts only once the window holds this many outcomes. @default 20 */
  minimumThroughput?: number;
  /** The sliding window for the ratio, in ms. @default 30000 */
  windowMs?: number;
  /** How long it stays open before letting probes through, in ms. @default 5000 */
  openMs?: number;
  /** Probes allowed at once while half-open. @default 1 */
  halfOpenProbes?: number;
  /** A probe that has not reported after this long is presumed lost and frees its slot,
   * so a breaker can never stay half-open for good. @default 60000 */
  probeTimeoutMs?: number;
  /** @default systemClock */
  clock?: Clock;
  /** Told of every state change; an exception it throws is ignored (it cannot move the
   * breaker or reach the call that moved it). */
  onStateChange?: (state: BreakerState) => void;
  /** A saved `toJSON()` to start from (a restart keeps what the breaker had learned). */
  initialState?: BreakerSnapshot;
}

const SLOTS = 10;

const SPEC = {
  consecutiveFailures: opt.int({ min: 1, default: 5, infinite: true }),
  failureRatio: opt.num({ min: 0.001, max: 1, default: 0.5 }),
  minimumThroughput: opt.int({ min: 1, default: 20 }),
  windowMs: opt.ms({ default: 30_000 }),
  openMs: opt.ms({ default: 5_000 }),
  halfOpenProbes: opt.int({ min: 1, default: 1 }),
  probeTimeoutMs: opt.ms({ default: 60_000 }),
  clock: opt.clock(),
  onStateChange: opt.fn<(state: BreakerState) => void>(),
  initialState: opt.any<BreakerSnapshot>(
    (s) => s !== null && typeof s === "object",
    "a snapshot from CircuitBreaker.toJSON()",
  ),
} satisfies Record<keyof CircuitBreakerOptions, unknown>;

/**
 * A circuit breaker that sits outside the retry loop: while open, calls fail fast with
 * reason `circuit-open` and spend no attempt and no budget. It opens on consecutive
 * failures or on a failure ratio over a sliding window (ten time slots), and closes
 * again after a successful half-open probe.
 */
export class CircuitBreaker implements Breaker {
  readonly options: Readonly<
    Required<Omit<CircuitBreakerOptions, "clock" | "onStateChange" | "initialState">>
  >;
  readonly #clock: Clock;
  readonly #onStateChange: ((s: BreakerState) => void) | undefined;
  #state: BreakerState = "closed";
  #streak = 0;
  #openedAt = 0;
  #probes = 0;
  #lastProbeAt = Number.NEGATIVE_INFINITY;
  // Sliding window: SLOTS buckets of windowMs / SLOTS each.
  readonly #slotStart = new Array<number>(SLOTS).fill(Number.NEGATIVE_INFINITY);
  readonly #ok = new Array<number>(SLOTS).fill(0);
  readonly #bad = new Array<number>(SLOTS).fill(0);

  constructor(options: CircuitBreakerOptions = {}) {
    const { clock, onStateChange, initialState, ...rest } = parseOptions(
      "CircuitBreaker",
      SPEC,
      options,
    );
    this.options = Object.freeze(rest);
    this.#clock = clock ?? systemClock;
    this.#onStateChange = onStateChange;
    if (initialState !== undefined) this.#restore(initialState);
  }

  get state(): BreakerState {
    if (this.#state === "open" && this.#clock.now() - this.#openedAt >= this.options.openMs) {
      this.#set("half-open");
    }
    return this.#state;
  }

  /** While open, the time left before probes go through; else undefined. */
  retryInMs(): number | undefined {
    if (this.state !== "open") return undefined;
    return Math.max(0, this.#openedAt + this.options.openMs - this.#clock.now());
  }

  /** Asks to send one request. False means fail fast: the breaker is open (or probing). */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === "closed") return true;
    if (state === "open") return false;
    const now = this.#clock.now();
    // Probes that never reported (a lost attempt) free their slots after a bound.
    if (now - this.#lastProbeAt >= this.options.probeTimeoutMs) this.#probes = 0;
    if (this.#probes >= this.options.halfOpenProbes) return false;
    this.#probes++;
    this.#lastProbeAt = now;
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

  /** The state to save; `new CircuitBreaker({ ...options, initialState })` restores it.
   * Probes in flight are not saved: they belong to this process. */
  toJSON(): BreakerSnapshot {
    return {
      state: this.state,
      openedAt: this.#openedAt,
      streak: this.#streak,
      slots: this.#slotStart.map((s, i) => [s, this.#ok[i]!, this.#bad[i]!] as const),
    };
  }

  #restore(s: BreakerSnapshot) {
    const count = (n: unknown) => (typeof n === "number" && n >= 0 && Number.isFinite(n) ? n : 0);
    this.#state = s.state === "open" || s.state === "half-open" ? s.state : "closed";
    this.#openedAt = typeof s.openedAt === "number" ? s.openedAt : 0;
    this.#streak = count(s.streak);
    const slots = Array.isArray(s.slots) ? s.slots.slice(0, SLOTS) : [];
    slots.forEach((slot, i) => {
      if (!Array.isArray(slot)) return;
      this.#slotStart[i] = typeof slot[0] === "number" ? slot[0] : Number.NEGATIVE_INFINITY;
      this.#ok[i] = count(slot[1]);
      this.#bad[i] = count(slot[2]);
    });
  }

  #open() {
    this.#openedAt = this.#clock.now();
    this.#probes = 0;
    this.#set("open");
  }

  #set(state: BreakerState) {
    if (this.#state === state) return;
    this.#state = state;
    try {
      this.#onStateChange?.(state);
    } catch {
      // a listener's failure must not move the breaker or reach the call that moved it
    }
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
    const i = ((n % SLOTS) + SLOTS) % SLOTS; // time may be negative (a VirtualClock's start)
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

/** True for anything that implements Breaker (duck-typed: a custom or shared breaker). */
export const isBreaker = (x: unknown): x is Breaker =>
  x !== null &&
  typeof x === "object" &&
  ["tryAcquire", "onSuccess", "onFailure", "onNeutral"].every(
    (m) => typeof (x as Record<string, unknown>)[m] === "function",
  );
