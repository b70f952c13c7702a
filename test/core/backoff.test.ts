import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { backoff } from "../../src/core/backoff.ts";

describe("backoff", () => {
  it("full jitter is U(0, min(cap, base·2^(n-1)))", () => {
    const b = backoff({ baseMs: 100, capMs: 1_000 });
    expect(b.delay(1, "overloaded", 0, () => 0.999999)).toBeCloseTo(100, 0);
    expect(b.delay(3, "overloaded", 0, () => 0.5)).toBe(200);
    expect(b.delay(10, "overloaded", 0, () => 0.5)).toBe(500);
    expect(b.delay(1, "overloaded", 0, () => 0)).toBe(0);
  });

  it("uses a longer base for rate limits", () => {
    const b = backoff({ baseMs: 100, capMs: 10_000, rateLimitBaseMs: 1_000 });
    expect(b.delay(1, "rate_limited", 0, () => 0.5)).toBe(500);
    expect(b.delay(1, "server_error", 0, () => 0.5)).toBe(50);
  });

  it("'none' waits the ceiling; 'decorrelated' grows from the previous wait", () => {
    expect(
      backoff({ baseMs: 100, capMs: 1000, jitter: "none" }).delay(3, undefined, 0, Math.random),
    ).toBe(400);
    const d = backoff({ baseMs: 100, capMs: 1000, jitter: "decorrelated" });
    expect(d.delay(1, undefined, 0, () => 0)).toBe(100);
    expect(d.delay(2, undefined, 300, () => 1 - 1e-12)).toBeCloseTo(900, 3);
    expect(d.delay(2, undefined, 900, () => 1 - 1e-12)).toBe(1000);
  });

  it("is frozen and validates its options", () => {
    const b = backoff();
    expect(Object.isFrozen(b)).toBe(true);
    expect(() => backoff({ baseMs: -1 })).toThrow(
      /"baseMs" must be a number from 0 to \d+; got -1/,
    );
    expect(() => backoff({ capMs: 10, baseMs: 100 })).toThrow(/"capMs" must be >= baseMs/);
    expect(() => backoff({ jitter: "equal" as never })).toThrow(
      /"jitter" must be one of "full", "decorrelated", "none"; got "equal"/,
    );
    expect(() => backoff({ base: 1 } as never)).toThrow(/"base" must be a known option/);
  });

  it("property: every delay lies in [0, cap], whatever random returns", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.constantFrom("full", "decorrelated", "none" as const),
        fc.integer({ min: 1, max: 2_000 }),
        fc.double({ noNaN: false }),
        fc.constantFrom("rate_limited", "overloaded", undefined),
        fc.integer({ min: 0, max: 1_000_000 }),
        (base, extra, jitter, n, r, kind, prev) => {
          const cap = base + extra;
          const b = backoff({ baseMs: base, capMs: cap, jitter, rateLimitBaseMs: base });
          const d = b.delay(n, kind, prev, () => r);
          return Number.isFinite(d) && d >= 0 && d <= cap;
        },
      ),
      { numRuns: 3000 },
    );
  });
});
