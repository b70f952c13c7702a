import { isOverload } from "./concurrency.ts";
import type { Failure } from "./failure.ts";
import { opt, parseOptions, type Validator } from "./validate.ts";

/** Options of hedged first tokens (docs/architecture.md, rule 21). */
export interface HedgeOptions {
  /** Send the hedge after this many ms without first content (a stream's first content
   * chunk, a JSON answer's headers). @default learned: the `percentile` of this policy's
   * recent first-content times */
  afterMs?: number;
  /** Which of the recent first-content times the learned delay waits past. @default 0.95 */
  percentile?: number;
  /** Hedges are at most this share of the policy's calls. @default 0.05 */
  maxExtraRatio?: number;
  /** First-content times learned before a learned delay is trusted; no hedge before.
   * @default 20 */
  minSamples?: number;
}

const SPEC = {
  afterMs: opt.num({ min: 1, max: 600_000 }),
  percentile: opt.num({ min: 0.5, max: 0.999, default: 0.95 }),
  maxExtraRatio: opt.num({ min: 0.001, max: 1, default: 0.05 }),
  minSamples: opt.int({ min: 1, max: 1024, default: 20 }),
} satisfies Record<keyof HedgeOptions, unknown>;

/** After the upstream last showed overload, hedges wait this long before they go again. */
export const HEDGE_QUIET_MS = 30_000;

/** The recent first-content times a learned delay is read from. */
const WINDOW = 256;
/** The percentile is read again after this many new times (a sort of 256 numbers). */
const REREAD = 16;

/**
 * When and how often a policy hedges: the delay (given, or learned from recent
 * first-content times) and the budget (each call deposits `maxExtraRatio`, a hedge takes
 * one; at most ten saved, so a quiet hour cannot pay for a burst of hedges).
 */
export class Hedging {
  readonly afterMs: number | undefined;
  readonly percentile: number;
  readonly maxExtraRatio: number;
  readonly minSamples: number;
  readonly #times = new Float64Array(WINDOW);
  #count = 0;
  #learned: number | undefined;
  #sinceRead = 0;
  /** One to start: a new policy may hedge its first slow call. */
  #tokens = 1;
  readonly #maxTokens = 10;

  /** `v` and `at`: the owner and option name bad values are reported under. */
  constructor(options: HedgeOptions = {}, v: Validator | string = "Hedging", at = "") {
    const o = parseOptions(v, SPEC, options, at);
    this.afterMs = o.afterMs;
    this.percentile = o.percentile;
    this.maxExtraRatio = o.maxExtraRatio;
    this.minSamples = o.minSamples;
  }

  /** An attempt's first content came `ms` after it started. */
  learn(ms: number): void {
    if (!(ms >= 0) || ms === Number.POSITIVE_INFINITY) return;
    this.#times[this.#count % WINDOW] = ms;
    this.#count++;
    if (++this.#sinceRead >= REREAD || this.#learned === undefined) this.#read();
  }

  #read(): void {
    const n = Math.min(this.#count, WINDOW);
    this.#sinceRead = 0;
    if (n < this.minSamples) return;
    const sorted = this.#times.slice(0, n).sort();
    // The nearest rank: the smallest time at least `percentile` of the window is within.
    this.#learned = sorted[Math.max(0, Math.ceil(this.percentile * n) - 1)];
  }

  /** How long a call waits for first content before it hedges; undefined: not yet known. */
  get delayMs(): number | undefined {
    return this.afterMs ?? this.#learned;
  }

  #troubleAt = Number.NEGATIVE_INFINITY;

  /** An attempt failed: an overload (503, 529, an attempt our timer cut) or a rate limit
   * stands hedges down for HEDGE_QUIET_MS (a hedge must never make trouble worse). */
  heard(f: Failure, now: number): void {
    if (isOverload(f) || f.kind === "rate_limited") this.#troubleAt = now;
  }

  /** No overload or rate limit heard for HEDGE_QUIET_MS. */
  calm(now: number): boolean {
    return now - this.#troubleAt >= HEDGE_QUIET_MS;
  }

  /** A call started: it deposits its share of a hedge. */
  deposit(): void {
    this.#tokens = Math.min(this.#maxTokens, this.#tokens + this.maxExtraRatio);
  }

  /** A hedge asks to go: true takes a whole token. */
  take(): boolean {
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** A hedge taken but not sent (a gate refused it) gives its token back. */
  giveBack(): void {
    this.#tokens = Math.min(this.#maxTokens, this.#tokens + 1);
  }
}
