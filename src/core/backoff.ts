import type { FailureKind } from "./failure.ts";
import { MAX_DELAY_MS } from "./retry-after.ts";
import { validator } from "./validate.ts";

export type Jitter = "full" | "decorrelated" | "none";

export interface BackoffOptions {
  /** Ceiling of the first wait (full jitter) or its floor (decorrelated). Default 500 ms. */
  baseMs?: number;
  /** No wait is longer. Default 8 000 ms. */
  capMs?: number;
  /** Default "full": U(0, min(cap, base·2^(n-1))). */
  jitter?: Jitter;
  /** A separate base for `rate_limited`: quota windows are longer. Default 4 × baseMs. */
  rateLimitBaseMs?: number;
}

export interface Backoff {
  readonly baseMs: number;
  readonly capMs: number;
  readonly jitter: Jitter;
  readonly rateLimitBaseMs: number;
  /**
   * The wait before retry `n` (1 for the first retry). `previousMs` is the last wait
   * (decorrelated jitter grows from it). `random` returns [0, 1).
   */
  delay(n: number, kind: FailureKind | undefined, previousMs: number, random: () => number): number;
}

const JITTERS = ["full", "decorrelated", "none"] as const;

/** Builds an immutable backoff schedule; every delay lies in [0, capMs]. */
export function backoff(options: BackoffOptions = {}): Backoff {
  const v = validator("backoff");
  v.known("", options as Record<string, unknown>, ["baseMs", "capMs", "jitter", "rateLimitBaseMs"]);
  const baseMs = v.num("baseMs", options.baseMs ?? 500, 0, MAX_DELAY_MS);
  const capMs = v.num("capMs", options.capMs ?? 8_000, 0, MAX_DELAY_MS);
  const jitter = v.oneOf("jitter", options.jitter ?? "full", JITTERS);
  const rateLimitBaseMs = v.num(
    "rateLimitBaseMs",
    options.rateLimitBaseMs ?? Math.min(capMs, baseMs * 4),
    0,
    MAX_DELAY_MS,
  );
  if (capMs < baseMs) v.fail("capMs", capMs, `>= baseMs (${baseMs})`);

  return Object.freeze({
    baseMs,
    capMs,
    jitter,
    rateLimitBaseMs,
    delay(
      n: number,
      kind: FailureKind | undefined,
      previousMs: number,
      random: () => number,
    ): number {
      const base = kind === "rate_limited" ? rateLimitBaseMs : baseMs;
      const ceiling = Math.min(capMs, base * 2 ** Math.min(Math.max(n, 1) - 1, 52));
      const r = random();
      const u = r >= 0 && r < 1 ? r : 0; // a broken random never breaks the bounds
      switch (jitter) {
        case "none":
          return ceiling;
        case "decorrelated": {
          // AWS "decorrelated jitter": min(cap, U(base, 3·previous)).
          const prev = Math.max(base, previousMs);
          return Math.min(capMs, base + u * (prev * 3 - base));
        }
        default:
          return u * ceiling;
      }
    },
  });
}
