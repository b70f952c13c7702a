import type { Admission, AdmissionAsk } from "./budget.ts";
import { type Clock, systemClock } from "./clock.ts";
import { type Failure, KINDS } from "./failure.ts";
import { opt, parseOptions } from "./validate.ts";

/** Options of an `AdaptiveAdmission`. */
export interface AdaptiveAdmissionOptions {
  /** Attempts may reach `k` × the attempts the upstream accepted before retries are cut:
   * the K of client-side adaptive throttling (Google SRE book, ch. 21). @default 2 */
  k?: number;
  /** The window the accept ratio is measured over, in ms. Short, so the throttle follows
   * an upstream that saturates or recovers within seconds. @default 10000 */
  windowMs?: number;
  /** Retries admitted whatever the ratio, from a small bucket refilled at this rate (the
   * floor of Finagle's retry budget): a quiet client, or one whose first attempts met a
   * blip, never starves. @default 1 */
  minRetriesPerSecond?: number;
  /** The floor bucket's size: that many retries are admitted at once whatever the ratio
   * (gRPC's retry throttling starts with 10). @default 10 */
  burst?: number;
  /** @default systemClock */
  clock?: Clock;
  /** [0, 1): the throttle refuses with a probability. @default Math.random */
  random?: () => number;
}

const SLOTS = 10;

const SPEC = {
  k: opt.num({ min: 1, max: 100, default: 2 }),
  windowMs: opt.ms({ default: 10_000 }),
  minRetriesPerSecond: opt.num({ max: 1_000_000, default: 1 }),
  burst: opt.num({ max: 1_000_000, default: 10 }),
  clock: opt.clock(),
  random: opt.fn<() => number>(),
} satisfies Record<keyof AdaptiveAdmissionOptions, unknown>;

/**
 * Overload-aware admission of retries (docs/architecture.md, rule 5), the default of a
 * policy. It admits a retry with the probability client-side adaptive throttling gives
 * (Google SRE book, ch. 21): refuse with p = max(0, (attempts − k·accepts) / (attempts + 1))
 * over a short sliding window. An accept is an attempt the upstream answered as a healthy
 * upstream does, success or a definitive 4xx; a rejection is one that says it is not well:
 * 429, 5xx, 529, a timeout, a reset.
 *
 * So retries flow while they succeed and the upstream has room (half the requests failing
 * fast still leaves p = 0 with k = 2), and are cut as soon as it saturates or stops
 * answering (p → 1 as accepts vanish). A retry the server scheduled (a Retry-After within
 * the policy's cap) is admitted: the server said when it can take it. A small floor (a
 * burst of 10, refilled at 1 per second) keeps a quiet client from starving, and a
 * recovered upstream is admitted again within one window.
 */
export class AdaptiveAdmission implements Admission {
  readonly k: number;
  readonly windowMs: number;
  readonly minRetriesPerSecond: number;
  readonly burst: number;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #slotStart = new Array<number>(SLOTS).fill(Number.NEGATIVE_INFINITY);
  readonly #attempts = new Array<number>(SLOTS).fill(0);
  readonly #accepts = new Array<number>(SLOTS).fill(0);
  /** Retries asked, and those asked by runs not yet started, per slot (rule 23). */
  readonly #asks = new Array<number>(SLOTS).fill(0);
  readonly #asksNew = new Array<number>(SLOTS).fill(0);
  /** The floor: a bucket of `burst` retries refilled at minRetriesPerSecond. */
  #floor: number;
  #floorAt = Number.NEGATIVE_INFINITY;

  constructor(options: AdaptiveAdmissionOptions = {}) {
    const o = parseOptions("AdaptiveAdmission", SPEC, options);
    this.k = o.k;
    this.windowMs = o.windowMs;
    this.minRetriesPerSecond = o.minRetriesPerSecond;
    this.burst = o.burst;
    this.#clock = o.clock ?? systemClock;
    this.#random = o.random ?? Math.random;
    this.#floor = o.burst;
  }

  /** The probability a retry asked for now is refused. */
  get rejectProbability(): number {
    const { attempts, accepts } = this.stats;
    return Math.max(0, (attempts - this.k * accepts) / (attempts + 1));
  }

  /** Attempts and accepts in the window. */
  get stats(): { attempts: number; accepts: number } {
    const now = this.#clock.now();
    return { attempts: this.#sum(this.#attempts, now), accepts: this.#sum(this.#accepts, now) };
  }

  /** `counts` summed over the slots still in the window at `now`. */
  #sum(counts: readonly number[], now: number): number {
    let n = 0;
    for (let i = 0; i < SLOTS; i++) if (now - this.#slotStart[i]! < this.windowMs) n += counts[i]!;
    return n;
  }

  tryAcquire(failure?: Failure, ask?: AdmissionAsk): boolean {
    return this.admitsAt(this.rejectProbability, failure, ask);
  }

  /**
   * Whether a retry goes when the throttle refuses a share `p` of what it is asked (this
   * admission's own `rejectProbability`, or a fleet's): a scheduled retry always, else with
   * the share ranked by what the call's run has paid for (rule 23), then the floor. Each ask
   * counts toward the mix the ranking reads.
   */
  admitsAt(p: number, failure?: Failure, ask?: AdmissionAsk): boolean {
    if (failure?.retryAfterMs !== undefined) return true;
    const started = ask?.started !== false;
    const i = this.#rotate(this.#clock.now());
    this.#asks[i]!++;
    if (!started) this.#asksNew[i]!++;
    const r = this.#random();
    if ((r >= 0 && r < 1 ? r : 0) >= this.#refusing(p, started)) return true;
    return this.takeFloor();
  }

  /**
   * The share of retries refused for a run started or not (rule 23): the throttle refuses
   * the same share `p` of all it is asked, but those of runs that have paid for nothing
   * first, and a started run's only once none of theirs goes.
   */
  #refusing(p: number, started: boolean): number {
    if (p === 0) return 0;
    const now = this.#clock.now();
    const asks = this.#sum(this.#asks, now);
    const fresh = this.#sum(this.#asksNew, now);
    const refused = p * asks;
    if (!started) return fresh === 0 ? p : Math.min(1, refused / fresh);
    return asks === fresh ? p : Math.max(0, (refused - fresh) / (asks - fresh));
  }

  onSuccess(at?: number): void {
    this.#record(true, at);
  }

  onFailure(failure: Failure, at?: number): void {
    if (failure.kind === "cancelled") return; // says nothing about the upstream
    this.#record(!KINDS[failure.kind].upstream, at);
  }

  /** Takes one retry from the floor (`burst`, refilled at `minRetriesPerSecond`), whatever
   * the ratio; false when it is empty. */
  takeFloor(): boolean {
    const now = this.#clock.now();
    const rate = this.minRetriesPerSecond;
    if (this.#floorAt !== Number.NEGATIVE_INFINITY)
      this.#floor = Math.min(this.burst, this.#floor + ((now - this.#floorAt) / 1000) * rate);
    this.#floorAt = now;
    if (this.#floor < 1) return false;
    this.#floor -= 1;
    return true;
  }

  /** The slot being filled and when it ends: most outcomes land in it (the success path
   * pays an increment, not a division). */
  #slot = 0;
  #slotEnd = Number.NEGATIVE_INFINITY;

  /** Counts an outcome in its slot. `at` (an attempt's start) spares a clock read when it
   * falls in the slot being filled; otherwise the outcome counts now, when it is known. */
  #record(accepted: boolean, at?: number): void {
    let i = this.#slot;
    const inSlot =
      at !== undefined && at < this.#slotEnd && at >= this.#slotEnd - this.windowMs / SLOTS;
    if (!inSlot) i = this.#rotate(this.#clock.now());
    this.#attempts[i]!++;
    if (accepted) this.#accepts[i]!++;
  }

  #rotate(at: number): number {
    const width = this.windowMs / SLOTS;
    const n = Math.floor(at / width);
    const i = ((n % SLOTS) + SLOTS) % SLOTS;
    if (this.#slotStart[i] !== n * width) {
      this.#slotStart[i] = n * width;
      this.#attempts[i] = 0;
      this.#accepts[i] = 0;
      this.#asks[i] = 0;
      this.#asksNew[i] = 0;
    }
    this.#slot = i;
    this.#slotEnd = (n + 1) * width;
    return i;
  }
}
