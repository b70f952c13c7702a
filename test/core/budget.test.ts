import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RetryBudget } from "../../src/core/budget.ts";

describe("RetryBudget", () => {
  it("starts full, spends one token per retry, refuses at once when empty", () => {
    const b = new RetryBudget({ maxTokens: 3, tokenRatio: 0.1 });
    expect(b.tokens).toBe(3);
    expect([b.tryAcquire(), b.tryAcquire(), b.tryAcquire(), b.tryAcquire()]).toEqual([
      true,
      true,
      true,
      false,
    ]);
    expect(b.tokens).toBe(0);
    expect(b.stats).toEqual({ granted: 3, refused: 1 });
  });

  it("ten deposits of 0.1 make exactly one token", () => {
    const b = new RetryBudget({ maxTokens: 5, tokenRatio: 0.1 });
    for (let i = 0; i < 5; i++) b.tryAcquire();
    for (let i = 0; i < 9; i++) b.onSuccess();
    expect(b.tryAcquire()).toBe(false);
    b.onSuccess();
    expect(b.tokens).toBe(1);
    expect(b.tryAcquire()).toBe(true);
  });

  it("validates its options", () => {
    expect(() => new RetryBudget({ maxTokens: 0 })).toThrow(
      /RetryBudget: option "maxTokens" must be a number from 1/,
    );
    expect(() => new RetryBudget({ tokenRatio: Number.NaN })).toThrow(/"tokenRatio"/);
    expect(() => new RetryBudget({ ratio: 0.1 } as never)).toThrow(
      /"ratio" must be a known option/,
    );
  });

  it("property: 0 ≤ tokens ≤ max and a success never refills more than its ratio", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 2000 }).map((n) => n / 1000),
        fc.array(fc.constantFrom("acquire", "success", "refund"), { maxLength: 300 }),
        (max, ratio, ops) => {
          const b = new RetryBudget({ maxTokens: max, tokenRatio: ratio });
          for (const op of ops) {
            const before = b.tokens;
            if (op === "acquire") {
              const ok = b.tryAcquire();
              if (ok !== before >= 1) return false;
              if (ok && Math.abs(before - 1 - b.tokens) > 1e-9) return false;
            } else if (op === "success") {
              b.onSuccess();
              if (b.tokens - before > ratio + 1e-9) return false;
            } else b.refund();
            if (b.tokens < 0 || b.tokens > max) return false;
          }
          return true;
        },
      ),
      { numRuns: 1000 },
    );
  });
});
