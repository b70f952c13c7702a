import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { estimateCost } from "../../src/providers/cost.ts";

describe("estimateCost", () => {
  it("reads each provider's output allowance and sizes the prompt at 4 characters a token", () => {
    const chat = JSON.stringify({ model: "m", max_tokens: 300, messages: [] });
    expect(estimateCost(chat)).toEqual({
      inputTokens: Math.ceil(chat.length / 4),
      outputTokens: 300,
    });
    expect(estimateCost(JSON.stringify({ max_completion_tokens: 50 })).outputTokens).toBe(50);
    expect(estimateCost(JSON.stringify({ max_output_tokens: 70 })).outputTokens).toBe(70);
    expect(
      estimateCost(JSON.stringify({ generationConfig: { maxOutputTokens: 90 } })).outputTokens,
    ).toBe(90);
    expect(estimateCost(JSON.stringify({ max_tokens: "lots" })).outputTokens).toBe(0);
  });

  it("never throws, and never returns a negative or NaN cost (property)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (body) => {
        const c = estimateCost(body);
        for (const n of [c.inputTokens, c.outputTokens]) {
          expect(Number.isFinite(n)).toBe(true);
          expect(n).toBeGreaterThanOrEqual(0);
        }
      }),
    );
  });
});
