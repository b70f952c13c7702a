import type { FailureKind } from "./failure.ts";
import { MAX_DELAY_MS } from "./retry-after.ts";
import { opt, parseOptions, Validator } from "./validate.ts";

/** How the built-in backoff spreads its waits: full jitter U(0, ceiling), decorrelated (grows from the last wait), or none. */
export type Jitter = "full" | "decorrelated" | "none";

/**
 * How long to wait before a retry when the server gave no hint. Implement it to bring your
 * own formula: the policy asks it once per retry and keeps the wait within the deadline.
 */
export interface Backoff {
  /**
   * The wait before retry `n` (1 for the first retry), in ms. `kind` is the failure's kind,
   * `previousMs` the last wait (decorrelated jitter grows from it), `random` returns [0, 1).
   */
  delay(n: number, kind: FailureKind | undefined, previousMs: number, random: () => number): number;
}

/** Options of the built-in exponential backoff. */
export interface BackoffOptions {
  /** Ceiling of the first wait (full jitter) or its floor (decorrelated).
   * @default 500 */
  baseMs?: number;
  /** No wait is longer. @default 8000 */
  capMs?: number;
  /** `"full"`: U(0, min(cap, base·2^(n-1))). @default "full" */
  jitter?: Jitter;
  /** A separate base for `rate_limited`: quota windows are longer.
   * @default min(capMs, 4 × baseMs) */
  rateLimitBaseMs?: number;
}

/** The built-in exponential backoff, with the values it was built from. */
export interface ExponentialBackoff extends Backoff {
  readonly baseMs: number;
  readonly capMs: number;
  readonly jitter: Jitter;
  readonly rateLimitBaseMs: number;
}

const JITTERS = ["full", "decorrelated", "none"] as const;

const SPEC = {
  baseMs: opt.num({ max: MAX_DELAY_MS, default: 500 }),
  capMs: opt.num({ max: MAX_DELAY_MS, default: 8_000 }),
  jitter: opt.oneOf(JITTERS, "full"),
  rateLimitBaseMs: opt.num({ max: MAX_DELAY_MS, default: Number.NaN }), // NaN: derived below
} satisfies Record<keyof BackoffOptions, unknown>;

/** A broken random source never breaks the bounds. */
const unit = (r: number): number => (r >= 0 && r < 1 ? r : 0);

/** Validates backoff options under `v` (option names prefixed with `at`) and builds it. */
export function parseBackoff(v: Validator, options: unknown, at = ""): ExponentialBackoff {
  const o = parseOptions(v, SPEC, options, at);
  const name = (key: string) => (at ? `${at}.${key}` : key);
  if (o.capMs < o.baseMs) v.fail(name("capMs"), o.capMs, `>= baseMs (${o.baseMs})`);
  const { baseMs, capMs, jitter } = o;
  const rateLimitBaseMs = Number.isNaN(o.rateLimitBaseMs)
    ? Math.min(capMs, baseMs * 4)
    : o.rateLimitBaseMs;
  const delay = (n: number, kind: FailureKind | undefined, prev: number, random: () => number) => {
    const base = kind === "rate_limited" ? rateLimitBaseMs : baseMs;
    const ceiling = Math.min(capMs, base * 2 ** Math.min(Math.max(n, 1) - 1, 52));
    const u = unit(random());
    if (jitter === "none") return ceiling;
    // AWS "decorrelated jitter": min(cap, U(base, 3·previous)).
    if (jitter === "decorrelated")
      return Math.min(capMs, base + u * (Math.max(base, prev) * 3 - base));
    return u * ceiling;
  };
  return Object.freeze({ baseMs, capMs, jitter, rateLimitBaseMs, delay });
}

/** Builds an immutable backoff schedule; every delay lies in [0, capMs]. */
export const backoff = (options: BackoffOptions = {}): ExponentialBackoff =>
  parseBackoff(new Validator("backoff"), options);

export const isBackoff = (b: unknown): b is Backoff =>
  b !== null && typeof b === "object" && typeof (b as Backoff).delay === "function";
