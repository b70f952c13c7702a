import type { Failure } from "./failure.ts";
import { redact } from "./redact.ts";
import { describeError } from "./safe.ts";
import { addUsage, costOf, type Price, type Usage, ZERO_USAGE } from "./usage.ts";

/** A hook that threw, and what it threw. */
export interface HookError {
  readonly hook: string;
  readonly error: unknown;
}

/** One attempt of a call, as the ledger keeps it. */
export interface AttemptRecord {
  /** 1 for the first attempt. */
  readonly attempt: number;
  readonly startedAt: number;
  readonly durationMs: number;
  /** What was waited before this attempt began: the retry's wait (the backoff or the
   * Retry-After) and any wait at the rate limiter (a first attempt may wait there too). */
  readonly waitMs: number;
  readonly outcome: "ok" | "failed";
  readonly failure?: Failure;
  readonly usage?: Usage;
  /** The upstream that answered it, when a call spans several (a fallback chain). */
  readonly upstream?: string;
  /** The model that answered, as its answer names it (a dated snapshot of the one asked
   * for, or another a router chose). */
  readonly responseModel?: string;
  /** Its price, when it differs from the ledger's (an upstream with another model). */
  readonly price?: Price | undefined;
  /** Sent as a hedge: while an earlier attempt was still in flight (rule 21). */
  readonly hedge?: true;
  /** In a hedge race: whether this attempt showed content first ("won") or was cut
   * because another did ("lost"; its estimated cost is wasted). */
  readonly hedged?: "won" | "lost";
  /** `usage` is breakwater's estimate (a stream cut before the provider said what it
   * billed): the prompt as the limiter estimated it, the text shown at ~4 characters a token. */
  readonly usageEstimated?: true;
}

/**
 * What one logical call cost (docs/architecture.md, rule 7): `usage` is the successful attempt's (the
 * context figure), `wasted` the sum over failed attempts, `billed` = usage + wasted. A
 * call where nothing succeeded still reports everything it spent, in `wasted`.
 */
export class Ledger {
  readonly attempts: AttemptRecord[] = [];
  /** Exceptions the call's hooks threw (onRetry, classify, usage, ...): kept here and
   * reported, never allowed to change the call's outcome. */
  readonly hookErrors: HookError[] = [];
  readonly startedAt: number;
  readonly model: string | undefined;
  readonly price: Price | undefined;
  endedAt: number | undefined;

  constructor(startedAt: number, model?: string, price?: Price) {
    this.startedAt = startedAt;
    this.model = model;
    this.price = price;
  }

  /** Adds an attempt. */
  record(a: AttemptRecord): void {
    this.attempts.push(a);
  }

  get retries(): number {
    return Math.max(0, this.attempts.length - 1);
  }

  get succeeded(): boolean {
    return this.attempts.some((a) => a.outcome === "ok");
  }

  get usage(): Usage {
    const ok = this.attempts.find((a) => a.outcome === "ok");
    return ok?.usage ?? ZERO_USAGE;
  }

  get wasted(): Usage {
    let u = ZERO_USAGE;
    for (const a of this.attempts) if (a.outcome === "failed") u = addUsage(u, a.usage);
    return u;
  }

  get billed(): Usage {
    return addUsage(this.usage, this.wasted);
  }

  /** Money, when a price is known: `{ usage, wasted, billed }` in the price's currency. */
  get cost(): { usage: number; wasted: number; billed: number } | undefined {
    const priced = this.attempts.some((a) => (a.price ?? this.price) !== undefined);
    if (this.price === undefined && !priced) return undefined;
    let usage = 0;
    let wasted = 0;
    for (const a of this.attempts) {
      const c = costOf(a.usage ?? ZERO_USAGE, a.price ?? this.price) ?? 0;
      if (a.outcome === "ok") usage = c;
      else wasted += c;
    }
    return { usage, wasted, billed: usage + wasted };
  }

  get waitedMs(): number {
    return this.attempts.reduce((s, a) => s + a.waitMs, 0);
  }

  /** The ledger as plain data (for logs and reports). */
  toJSON() {
    return {
      model: this.model,
      startedAt: this.startedAt,
      endedAt: this.endedAt,
      attempts: this.attempts,
      usage: this.usage,
      wasted: this.wasted,
      billed: this.billed,
      cost: this.cost,
      ...(this.hookErrors.length > 0 && {
        hookErrors: this.hookErrors.map((h) => ({ hook: h.hook, message: messageOf(h.error) })),
      }),
    };
  }
}

const messageOf = (error: unknown): string => redact(describeError(error));
