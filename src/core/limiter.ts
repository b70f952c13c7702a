import { type Clock, systemClock } from "./clock.ts";
import { AdaptiveConcurrency, type AtSend, type SlotEnd } from "./concurrency.ts";
import { type LimitState, parseRateLimitHeaders, type RateLimitState } from "./ratelimit.ts";
import type { Usage } from "./usage.ts";
import { opt, parseOptions } from "./validate.ts";

/** Limits known in advance (the provider's published ones for your tier). */
export interface RateLimits {
  requestsPerMinute?: number;
  /** Input and output tokens together (OpenAI's TPM). */
  tokensPerMinute?: number;
  inputTokensPerMinute?: number;
  outputTokensPerMinute?: number;
}

/** Options of a `RateLimiter`. */
export interface RateLimiterOptions {
  /** Limits to hold before any response tells better. @default none: headers only */
  limits?: RateLimits;
  /** Calls in flight at once, across everything sharing the limiter. @default unlimited */
  maxConcurrent?: number;
  /** Calls in flight at once for one run and the child runs it started. @default unlimited */
  maxConcurrentPerRun?: number;
  /** Calls waiting at once; more are refused at once. @default 1000 */
  maxQueue?: number;
  /** Adapts how many calls may be in flight to what the upstream signals (docs/
   * architecture.md, rule 19): no cap while nothing is wrong, cut on overload answers and
   * attempts cut waiting for one, grown back as answers come. @default true */
  adaptiveConcurrency?: boolean;
  clock?: Clock;
}

/** What one call is expected to spend: its prompt and its output allowance. */
export interface Cost {
  readonly inputTokens?: number;
  readonly outputTokens?: number;
}

/** How a call waits: until its deadline at most, cancellable, ahead of lower priorities;
 * `group` is the run tree it belongs to (fairness and the per-run cap). */
export interface AcquireOptions {
  deadlineAt?: number;
  signal?: AbortSignal;
  priority?: number;
  group?: object;
  /** False for a call of a run that has paid for nothing yet: of equal priority, a call
   * whose run has had an answer goes first (rule 23). @default true */
  started?: boolean;
}

/** A call's claim on the limiter. */
export interface Permit {
  /** The call ended: what it reserved and did not spend goes back; `end` says when it was
   * sent and how it failed, if it did (what adaptive concurrency reads). Only the first
   * `settle` or `cancel` counts; later ones are ignored. */
  settle(actual?: Partial<Usage>, end?: SlotEnd): void;
  /** The call was never sent: everything goes back, the request too. */
  cancel(): void;
}

/**
 * What a policy asks of its rate limiter (option `limiter`): a `RateLimiter`, or your own
 * (one whose buckets live in a shared store keeps local leases, so `tryAcquire` never
 * waits on the network).
 */
export interface Limiter {
  /** A permit now, or undefined when the call would have to wait. */
  tryAcquire(cost: Cost, group?: object): Permit | undefined;
  /** A permit once there is room; rejects with a RateLimitWaitError when the wait would
   * pass `deadlineAt`, and with the signal's reason when it aborts. */
  acquire(cost: Cost, options?: AcquireOptions): Promise<Permit>;
  /** A response's rate-limit headers (errors too). */
  observeHeaders(headers: unknown, wallNow?: number): void;
  /** Nobody is sent for the next `ms` (a 429's Retry-After), on the limiter's own clock. */
  hold(ms: number): void;
  /** How long the hold still keeps every call (0 when none): a call is refused at once
   * rather than held past the wait cap. Optional: without it a hold is waited out. */
  heldForMs?(): number;
  /** The share left of the tightest limit, 0 to 1. */
  headroom(): number;
  /** False while something shows overload (a 429's hold, a concurrency cut in force).
   * Optional: a hedge goes only while it is not false; without it, a hedge never stands
   * down for the limiter. */
  readonly calm?: boolean;
  /** What others calling the same upstream under the same limits spent since the last
   * call (the other processes of a fleet, told at each sync): taken from the buckets; a
   * negative amount (reserved and not spent after all) is given back. A limit an answer's
   * headers corrected since the last call counts it already. Optional: without it a fleet
   * shares only its holds. */
  spend?(spent: Spend): void;
}

/** What calls spent of each limit: requests and tokens. */
export type Spend = { readonly [D in keyof RateLimitState]?: number };

/** True for anything that implements Limiter (duck-typed, as breakers are). */
export const isLimiter = (x: unknown): x is Limiter =>
  x !== null &&
  typeof x === "object" &&
  ["tryAcquire", "acquire", "observeHeaders", "hold", "headroom"].every(
    (m) => typeof (x as Record<string, unknown>)[m] === "function",
  );

/** The limiter would make a call wait past its deadline, or its queue is full: refused
 * before anything is sent. */
export class RateLimitWaitError extends Error {
  override name = "BreakwaterRateLimitWaitError";
  /** How long the call would have had to wait. */
  readonly waitMs: number;
  constructor(message: string, waitMs: number) {
    super(message);
    this.waitMs = waitMs;
  }
}

/** A token bucket that refills continuously: `capacity` over a window. */
class Bucket {
  capacity: number;
  level: number;
  perMs: number;
  at: number;
  /** Times the server corrected it: a permit taken before the last correction gets no
   * refund, since the server's count already says what is left. */
  corrections = 0;
  /** `corrections` when others' spending was last told (`RateLimiter.spend`). */
  told = 0;

  constructor(capacity: number, windowMs: number, now: number) {
    this.capacity = capacity;
    this.level = capacity;
    this.perMs = capacity / windowMs;
    this.at = now;
  }

  refill(now: number): void {
    if (now > this.at)
      this.level = Math.min(this.capacity, this.level + (now - this.at) * this.perMs);
    this.at = Math.max(this.at, now);
  }

  /** Ms until `n` fits. A call larger than the whole window waits for a full bucket and
   * goes: the estimate may be high, and the server has the last word. */
  waitFor(n: number, now: number): number {
    this.refill(now);
    const need = Math.min(n, this.capacity);
    return this.level >= need ? 0 : (need - this.level) / this.perMs;
  }

  /** Takes `n` (never below empty); returns what it took. */
  take(n: number): number {
    const took = Math.min(n, Math.max(0, this.level));
    this.level -= took;
    return took;
  }

  /** Gives back `n` (a negative `n` spends more), kept within [0, capacity]. */
  give(n: number): void {
    this.level = Math.max(0, Math.min(this.capacity, this.level + n));
  }

  /** What the server says: never more left than it counts; its limit and refill pace. */
  correct(s: LimitState, now: number): void {
    this.refill(now);
    this.corrections++;
    if (s.limit !== undefined && s.limit > 0) this.capacity = s.limit;
    if (s.remaining !== undefined) this.level = Math.min(this.level, s.remaining);
    this.level = Math.min(this.level, this.capacity);
    // Until the reset the server refills what is spent: its pace, as of this response.
    const rem = s.remaining;
    if (s.resetAtMs !== undefined && s.resetAtMs > now && rem !== undefined && rem < this.capacity)
      this.perMs = (this.capacity - rem) / (s.resetAtMs - now);
  }
}

interface Waiter {
  readonly cost: Cost;
  readonly priority: number;
  readonly started: boolean;
  readonly seq: number;
  readonly deadlineAt: number;
  readonly group: object | undefined;
  grant(p: Permit): void;
  refuse(e: unknown): void;
}

/** The permit of a call sent while nothing is known of the limits. */
class LightPermit implements Permit, AtSend {
  readonly inFlightAtSend: number;
  readonly limitAtSend: number;
  readonly heldAtSend = false;
  readonly #end: (p: LightPermit, slot: SlotEnd | undefined) => void;
  #done = false;

  constructor(
    inFlight: number,
    limit: number,
    end: (p: LightPermit, slot: SlotEnd | undefined) => void,
  ) {
    this.inFlightAtSend = inFlight;
    this.limitAtSend = limit;
    this.#end = end;
  }

  settle(_actual?: Partial<Usage>, slot?: SlotEnd): void {
    if (this.#done) return;
    this.#done = true;
    this.#end(this, slot);
  }

  cancel(): void {
    this.settle();
  }
}

/** A permit's claim, until it ends. */
interface Held {
  readonly cost: Cost;
  readonly group: object | undefined;
  readonly buckets: readonly { d: Dimension; b: Bucket; took: number; seen: number }[];
  /** What adaptive concurrency reads of the moment it was sent. */
  readonly limitAtSend: number;
  readonly heldAtSend: boolean;
  readonly inFlightAtSend: number;
  done: boolean;
}

const MINUTE = 60_000;
const INF = Number.POSITIVE_INFINITY;
const perMinute = opt.num({ min: 1, default: Number.NaN });

const SPEC = {
  limits: opt.object({
    requestsPerMinute: perMinute,
    tokensPerMinute: perMinute,
    inputTokensPerMinute: perMinute,
    outputTokensPerMinute: perMinute,
  }),
  maxConcurrent: opt.int({ min: 1, default: INF, infinite: true }),
  maxConcurrentPerRun: opt.int({ min: 1, default: INF, infinite: true }),
  maxQueue: opt.int({ default: 1000, infinite: true }),
  adaptiveConcurrency: opt.bool(true),
  clock: opt.clock(),
};

/** A dimension of the limits: what a bucket counts. */
type Dimension = keyof RateLimitState;

const inputOf = (c: Cost) => c.inputTokens ?? 0;
const outputOf = (c: Cost) => c.outputTokens ?? 0;
/** What a call spent of its prompt: its usage where known, else what it was expected to. */
const inputSpent = (c: Cost, u: Partial<Usage> | undefined) => u?.inputTokens ?? inputOf(c);
/** What a call spent of its output allowance: its usage where known; a failed call with
 * no usage (`{}`) spent none; one that never said (undefined) keeps it all. */
const outputSpent = (c: Cost, u: Partial<Usage> | undefined) =>
  u?.outputTokens ?? (u === undefined ? outputOf(c) : 0);

/** The one table of the dimensions: what a call needs of each before it goes, and what it
 * spent once it ended (its usage where known; a failed call with no usage spent its input
 * and none of its output). */
const DIMENSIONS: Readonly<
  Record<
    Dimension,
    {
      readonly need: (c: Cost) => number;
      readonly spent: (c: Cost, u: Partial<Usage> | undefined) => number;
      readonly option: keyof RateLimits;
    }
  >
> = {
  requests: { need: () => 1, spent: () => 1, option: "requestsPerMinute" },
  tokens: {
    need: (c) => inputOf(c) + outputOf(c),
    spent: (c, u) => inputSpent(c, u) + outputSpent(c, u),
    option: "tokensPerMinute",
  },
  inputTokens: { need: inputOf, spent: inputSpent, option: "inputTokensPerMinute" },
  outputTokens: { need: outputOf, spent: outputSpent, option: "outputTokensPerMinute" },
};
const DIMS = Object.keys(DIMENSIONS) as Dimension[];

/** The limits, in one order (what a fleet's shared spending is counted in). */
export const LIMITS: readonly Dimension[] = DIMS;

/** What a call of `cost` takes of each limit when it is let go (before its usage is known). */
export function needOf(cost: Cost): Spend {
  const out: { [D in Dimension]?: number } = {};
  for (const d of DIMS) out[d] = DIMENSIONS[d].need(cost);
  return out;
}

/** What a call of `cost` spent of each limit once it ended with `actual` (its usage). */
export function spentOf(cost: Cost, actual: Partial<Usage> | undefined): Spend {
  const out: { [D in Dimension]?: number } = {};
  for (const d of DIMS) out[d] = DIMENSIONS[d].spent(cost, actual);
  return out;
}

/** Whether `w` goes before `b`: priority, then a run under way before one not begun (rule
 * 23), then urgency (the earliest deadline among those about to miss it), then the newest. */
function ahead(w: Waiter, b: Waiter, urgentBefore: number): boolean {
  if (w.priority !== b.priority) return w.priority > b.priority;
  if (w.started !== b.started) return w.started;
  const wUrgent = w.deadlineAt <= urgentBefore;
  if (wUrgent !== b.deadlineAt <= urgentBefore) return wUrgent;
  return wUrgent ? w.deadlineAt < b.deadlineAt : w.seq > b.seq;
}

/** Past the deadline, beyond the rounding of the refill arithmetic. */
const late = (now: number, wait: number, deadlineAt: number) => now + wait > deadlineAt + 1e-6;

const tooLong = (wait: number) =>
  new RateLimitWaitError(
    `the rate limits would hold the call ${Math.ceil(wait)} ms, past its deadline`,
    wait,
  );

/**
 * Keeps calls under an upstream's rate limits before they are sent, instead of meeting
 * the 429 (docs/architecture.md, rule 16): request and token buckets set from configured
 * limits and corrected by every response's rate-limit headers; a call that would exceed
 * them waits in a queue (by priority, then the earliest deadline among calls about to miss
 * theirs, then the newest; a run tree held to its share) if its deadline allows, and is
 * refused at once with the wait it would have needed if not. Share one per upstream (key × model). With no limits configured and no
 * headers seen, it lets everything through (fails open).
 */
export class RateLimiter implements Limiter {
  readonly maxConcurrent: number;
  readonly maxConcurrentPerRun: number;
  readonly maxQueue: number;
  readonly #clock: Clock;
  /** One bucket per dimension a limit is known of. */
  readonly #buckets: Partial<Record<Dimension, Bucket>> = {};
  /** The dimensions that have a bucket, in the table's order. */
  #known: Dimension[] = [];
  readonly #queue: Waiter[] = [];
  readonly #groups = new Map<object, number>();
  /** Whether a run tree has a cap of its own. */
  readonly #perRun: boolean;
  #inFlight = 0;
  #seq = 0;
  #holdUntil = Number.NEGATIVE_INFINITY;
  /** No bucket and no hold yet: everything goes. */
  #blank = true;
  #timer: (() => void) | undefined;
  /** How many calls the upstream takes at once now, learned (rule 19). */
  readonly #concurrency: AdaptiveConcurrency | undefined;
  /** How long calls usually hold a permit (a moving average). */
  #held = 0;

  constructor(options: RateLimiterOptions = {}) {
    const o = parseOptions("RateLimiter", SPEC, options);
    this.maxConcurrent = o.maxConcurrent;
    this.maxConcurrentPerRun = o.maxConcurrentPerRun;
    this.#perRun = o.maxConcurrentPerRun !== INF;
    this.maxQueue = o.maxQueue;
    this.#clock = o.clock ?? systemClock;
    if (o.adaptiveConcurrency) this.#concurrency = new AdaptiveConcurrency();
    const now = this.#clock.now();
    for (const d of DIMS) {
      const n = o.limits[DIMENSIONS[d].option];
      if (!Number.isNaN(n)) this.#add(d, new Bucket(n, MINUTE, now));
    }
  }

  #add(d: Dimension, b: Bucket): void {
    this.#buckets[d] = b;
    this.#known = DIMS.filter((k) => this.#buckets[k] !== undefined);
    this.#blank = false;
  }

  /** Calls waiting for room. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Calls holding a permit. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Ms until `cost` fits every bucket and any hold has passed (0: now). */
  #waitFor(cost: Cost, now: number): number {
    let wait = Math.max(0, this.#holdUntil - now);
    for (const d of this.#known) {
      const n = DIMENSIONS[d].need(cost);
      if (n > 0) wait = Math.max(wait, this.#buckets[d]!.waitFor(n, now));
    }
    return wait;
  }

  /** Calls that may be in flight now: the configured cap, or the learned one if lower. */
  get concurrencyLimit(): number {
    return Math.min(this.maxConcurrent, this.#concurrency?.limit ?? INF);
  }

  #hasSlot(group: object | undefined): boolean {
    if (this.#inFlight >= this.maxConcurrent) return false;
    const learned = this.#concurrency?.limit;
    if (learned !== undefined && this.#inFlight >= learned) return false;
    return (
      !this.#perRun ||
      group === undefined ||
      (this.#groups.get(group) ?? 0) < this.maxConcurrentPerRun
    );
  }

  #take(cost: Cost, group: object | undefined): Permit {
    const held: Held = {
      cost,
      group,
      // What each bucket gave, and how often the server had corrected it by then.
      buckets: this.#known.map((d) => {
        const b = this.#buckets[d]!;
        return { d, b, took: b.take(DIMENSIONS[d].need(cost)), seen: b.corrections };
      }),
      limitAtSend: this.#concurrency?.limit ?? INF,
      heldAtSend: this.#queue.length > 0,
      inFlightAtSend: ++this.#inFlight,
      done: false,
    };
    // Counted per run tree only where a run tree has a cap.
    if (group !== undefined && this.#perRun)
      this.#groups.set(group, (this.#groups.get(group) ?? 0) + 1);
    return {
      settle: (actual, slot) => this.#end(held, actual, false, slot),
      cancel: () => this.#end(held, undefined, true),
    };
  }

  /** A permit while nothing is known of the limits: it counts the call in flight and
   * tells the concurrency limit how it went, and nothing more. */
  #light(): Permit {
    return new LightPermit(++this.#inFlight, this.#concurrency?.limit ?? INF, this.#lightEnd);
  }

  readonly #lightEnd = (p: LightPermit, slot: SlotEnd | undefined): void => {
    const c = this.#concurrency;
    if (slot !== undefined && c !== undefined) {
      // An answer while all is well only moves the pace: no clock read.
      const now = slot.failure === undefined && c.calm ? 0 : this.#clock.now();
      if (now !== 0) this.#hold(now - slot.startedAt);
      c.ended(slot, p, this.#inFlight, now);
    }
    this.#inFlight--;
    if (this.#queue.length > 0 || this.#timer !== undefined) this.#pump();
  };

  /** A permit ends: the concurrency limit hears how the attempt went; what the call
   * reserved and did not spend goes back (its output allowance, mostly); one that spent
   * more leaves the bucket lower, never below empty. A failed call with no usage keeps its
   * request and its input, and gives back its output allowance. */
  #end(h: Held, actual: Partial<Usage> | undefined, cancelled: boolean, slot?: SlotEnd): void {
    if (h.done) return;
    h.done = true;
    if (slot !== undefined) {
      const now = this.#clock.now();
      this.#hold(now - slot.startedAt);
      this.#concurrency?.ended(slot, h, this.#inFlight, now);
    }
    this.#release(h.group);
    for (const { d, b, took, seen } of h.buckets) {
      // Since the server last spoke, its count rules (it never had this refund); a
      // request sent stays spent.
      if (b.corrections !== seen || (d === "requests" && !cancelled)) continue;
      b.give(cancelled ? took : took - DIMENSIONS[d].spent(h.cost, actual));
    }
    this.#pump();
  }

  /** A call held its permit `ms`: the usual duration moves a tenth of the way to it. */
  #hold(ms: number): void {
    this.#held = this.#held === 0 ? ms : this.#held + (ms - this.#held) / 10;
  }

  #release(group: object | undefined): void {
    this.#inFlight--;
    if (group === undefined || !this.#perRun) return;
    const left = this.#groups.get(group)! - 1;
    if (left === 0) this.#groups.delete(group);
    else this.#groups.set(group, left);
  }

  /** A permit now, without waiting, or undefined when the call would have to wait. */
  tryAcquire(cost: Cost, group?: object): Permit | undefined {
    if (this.#queue.length > 0 || !this.#hasSlot(group)) return undefined;
    // Nothing known yet (no limits, no headers, no hold): no clock read, no bucket.
    if (this.#blank && (group === undefined || !this.#perRun)) return this.#light();
    const free = this.#blank || this.#waitFor(cost, this.#clock.now()) === 0;
    return free ? this.#take(cost, group) : undefined;
  }

  /**
   * Waits until `cost` fits (at once when it does) and returns the permit to settle when
   * the call ends. Refuses with a RateLimitWaitError when the wait would pass `deadlineAt`
   * or the queue is full, and with the signal's reason when `signal` aborts.
   */
  acquire(cost: Cost, o: AcquireOptions = {}): Promise<Permit> {
    const now = this.#clock.now();
    const now_ = this.tryAcquire(cost, o.group);
    if (now_ !== undefined) return Promise.resolve(now_);
    if (o.signal?.aborted) return Promise.reject(o.signal.reason);
    const deadlineAt = o.deadlineAt ?? INF;
    const wait = this.#waitFor(cost, now);
    if (late(now, wait, deadlineAt)) return Promise.reject(tooLong(wait));
    if (this.#queue.length >= this.maxQueue)
      return Promise.reject(new RateLimitWaitError("the rate limiter's queue is full", wait));
    return new Promise<Permit>((resolve, reject) => {
      const signal = o.signal;
      const onAbort = () => {
        this.#remove(waiter);
        reject(signal!.reason);
        this.#pump();
      };
      const waiter: Waiter = {
        cost,
        priority: o.priority ?? 0,
        started: o.started !== false,
        seq: this.#seq++,
        deadlineAt,
        group: o.group,
        grant: (p) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(p);
        },
        refuse: (e) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(waiter);
      this.#pump();
    });
  }

  #remove(w: Waiter): void {
    const i = this.#queue.indexOf(w);
    if (i >= 0) this.#queue.splice(i, 1);
  }

  /**
   * Refuses the waiters that can no longer be answered by their deadline (sent now, a call
   * takes about the usual duration): those the buckets would hold past that (which changes
   * only when something takes or the server says less is left, and both pump) and those
   * still waiting when it comes (the pump wakes for it). Returns the waiter to serve next
   * among the rest with a free slot: the highest priority; then a call of a run under way
   * (rule 23); then one about to miss its deadline (within two of the calls' usual
   * durations; the earliest deadline first); then the newest. When demand outruns the
   * upstream, most calls then wait little and a few wait long, instead of every call
   * waiting the whole queue, and the few are served before their deadline passes; the
   * calls of an agent's turn, sent together, go together. A run tree's share is its cap
   * (`maxConcurrentPerRun`), not its place in the queue. One pass from the back (a pump
   * made two, and under a long queue they were a fifth of a call's cost): of waiters
   * ranked alike, the one nearer the front is served, as in a pass from the front.
   */
  #sweep(now: number): Waiter | undefined {
    const q = this.#queue;
    const urgentBefore = this.#clock.now() + 2 * this.#held;
    let best: Waiter | undefined;
    for (let i = q.length - 1; i >= 0; i--) {
      const w = q[i]!;
      const wait = this.#waitFor(w.cost, now);
      // It leaves once it can no longer be answered in time: sent, it would take about
      // the usual duration (rule 16).
      if (late(now, wait + this.#held, w.deadlineAt)) {
        q.splice(i, 1);
        w.refuse(tooLong(wait));
      } else if (this.#hasSlot(w.group) && (best === undefined || !ahead(best, w, urgentBefore)))
        best = w;
    }
    return best;
  }

  /** Drops what can no longer make its deadline, grants what fits, and arms one timer for
   * the next grant. */
  #pump(): void {
    if (this.#queue.length === 0 && this.#timer === undefined) return;
    this.#timer?.();
    this.#timer = undefined;
    const now = this.#clock.now();
    let wake = INF;
    for (;;) {
      const w = this.#sweep(now);
      if (w === undefined) break; // a slot frees on a settle, which pumps
      const wait = this.#waitFor(w.cost, now);
      if (wait > 0) {
        wake = wait;
        break;
      }
      this.#remove(w);
      w.grant(this.#take(w.cost, w.group));
    }
    // Wake for the next grant, or for the first deadline to pass (a waiter held by a slot
    // or by what is ahead of it is refused then, not when a slot frees).
    for (const w of this.#queue) wake = Math.min(wake, w.deadlineAt - this.#held - now + 1);
    if (this.#queue.length > 0 && Number.isFinite(wake))
      this.#timer = this.#clock.schedule(Math.max(1, Math.ceil(wake)), () => this.#pump());
  }

  /** What a response said of the limits: the buckets follow the server. */
  observe(state: RateLimitState): void {
    const now = this.#clock.now();
    for (const d of DIMS) {
      const s = state[d];
      if (s === undefined || (s.limit === undefined && s.remaining === undefined)) continue;
      let b = this.#buckets[d];
      if (b === undefined) {
        const capacity = s.limit ?? s.remaining!;
        if (!(capacity > 0)) continue;
        b = new Bucket(capacity, MINUTE, now);
        this.#add(d, b);
      }
      b.correct(s, now);
    }
    this.#pump();
  }

  /** Reads a response's rate-limit headers (`parseRateLimitHeaders`) into the buckets;
   * instants are read against the wall clock and moved onto the limiter's. */
  observeHeaders(headers: unknown, wallNow: number = Date.now()): void {
    const state = parseRateLimitHeaders(headers, wallNow);
    const shift = this.#clock.now() - wallNow;
    const moved: { -readonly [K in Dimension]?: LimitState } = {};
    for (const d of DIMS) {
      const s = state[d];
      if (s !== undefined)
        moved[d] = s.resetAtMs === undefined ? s : { ...s, resetAtMs: s.resetAtMs + shift };
    }
    this.observe(moved);
  }

  /** Nothing shows overload: no 429's wait holds the callers, and the concurrency limit
   * (when adaptive) has no cut in force. */
  get calm(): boolean {
    if (this.#holdUntil > this.#clock.now()) return false;
    return this.#concurrency?.armed !== true;
  }

  /** The upstream said to wait (a 429 with Retry-After): nobody is sent for `ms`. */
  hold(ms: number): void {
    const untilMs = this.#clock.now() + ms;
    if (!(untilMs > this.#holdUntil)) return;
    this.#holdUntil = untilMs;
    this.#blank = false;
    this.#pump();
  }

  heldForMs(): number {
    return Math.max(0, this.#holdUntil - this.#clock.now());
  }

  /** What other processes spent under the same limits since the last call (rule 18):
   * taken from the buckets known, as if spent here (a negative amount, reserved there and
   * not spent, is given back). A bucket an answer's headers corrected since the last call
   * is left as they said: they count the whole key's spending. A bucket not known yet
   * learns it from the next headers. */
  spend(spent: Spend): void {
    const now = this.#clock.now();
    for (const d of this.#known) {
      const b = this.#buckets[d]!;
      const corrected = b.corrections !== b.told;
      b.told = b.corrections;
      const n = spent[d];
      if (corrected || n === undefined || !Number.isFinite(n) || n === 0) continue;
      b.refill(now);
      b.give(-n);
    }
  }

  /** The share left of the tightest limit, 0 to 1 (1 with no limits known, 0 while
   * held): how much room this upstream has, for choosing among deployments. */
  headroom(): number {
    const now = this.#clock.now();
    if (now < this.#holdUntil) return 0;
    let least = 1;
    for (const d of this.#known) {
      const b = this.#buckets[d]!;
      b.refill(now);
      least = Math.min(least, b.level / b.capacity);
    }
    return least;
  }

  /** Each bucket's level and capacity now (for tests, dashboards and shared state). */
  snapshot(): Partial<Record<Dimension, { level: number; capacity: number }>> {
    const now = this.#clock.now();
    const out: Partial<Record<Dimension, { level: number; capacity: number }>> = {};
    for (const d of this.#known) {
      const b = this.#buckets[d]!;
      b.refill(now);
      out[d] = { level: b.level, capacity: b.capacity };
    }
    return out;
  }
}
