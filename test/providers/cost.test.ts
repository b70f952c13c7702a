import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { anthropicDialect } from "../../src/providers/anthropic.ts";
import { estimateCost } from "../../src/providers/checks.ts";
import { googleDialect } from "../../src/providers/google.ts";
import { openaiDialect } from "../../src/providers/openai.ts";

const openai = openaiDialect();
/** What the fetch layer hands it: the dialect, the body as sent, and the body parsed. */
const cost = (dialect: Parameters<typeof estimateCost>[0], body: unknown) => {
  const raw = JSON.stringify(body);
  return estimateCost(dialect, raw, body);
};

describe("estimateCost", () => {
  it("reads each provider's output allowance and sizes the prompt at 4 characters a token", () => {
    const body = { model: "m", max_tokens: 300, messages: [] };
    const chat = JSON.stringify(body);
    expect(cost(openai, body)).toEqual({
      inputTokens: Math.ceil(chat.length / 4),
      outputTokens: 300,
    });
    expect(cost(anthropicDialect, body).outputTokens).toBe(300);
    expect(cost(openai, { max_completion_tokens: 50 }).outputTokens).toBe(50);
    expect(cost(openai, { max_output_tokens: 70 }).outputTokens).toBe(70);
    expect(cost(googleDialect, { generationConfig: { maxOutputTokens: 90 } }).outputTokens).toBe(
      90,
    );
    expect(cost(openai, { max_tokens: "lots" }).outputTokens).toBe(0);
  });

  it("never throws, and never returns a negative or NaN cost (property)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (raw) => {
        let body: unknown;
        try {
          body = JSON.parse(raw);
        } catch {}
        for (const d of [openai, anthropicDialect, googleDialect, undefined]) {
          const c = estimateCost(d, raw, body);
          for (const n of [c.inputTokens, c.outputTokens]) {
            expect(Number.isFinite(n)).toBe(true);
            expect(n).toBeGreaterThanOrEqual(0);
          }
        }
      }),
    );
  });
});
