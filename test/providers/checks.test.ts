import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { streamChecks } from "../../src/providers/checks.ts";
import { openaiDialect } from "../../src/providers/dialects/openai.ts";
import { SseEvent } from "../../src/providers/sse.ts";

// A stream's truncation check reads its last events' finish reason.
const dialect = openaiDialect();
const checks = { truncation: "error", validate: undefined } as const;
const event = (json: string) => new SseEvent(`data: ${json}\n\n`);
const chunk = (finish: string | null, content = "word") =>
  event(
    JSON.stringify({
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta: { content }, finish_reason: finish }],
    }),
  );
const jsons = (es: readonly SseEvent[]) => es.map((e) => e.json);

describe("a stream's truncation check", () => {
  it("reads a truncating finish reason, however its text spells it", () => {
    const o = streamChecks(dialect, checks, jsons)!;
    expect(o.truncated!([chunk(null), chunk("length"), event("[DONE]")])).toBe(true);
    expect(o.truncated!([chunk(null), chunk("stop"), event("[DONE]")])).toBe(false);
    // A reason spelled with an escape is still read.
    const escaped = event(
      '{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"\\u006cength"}]}',
    );
    expect(o.truncated!([chunk(null), escaped])).toBe(true);
  });

  it("property: the verdict is the last finish reason's, whatever the content says", () => {
    const reason = fc.constantFrom(null, "stop", "length", "tool_calls", "content_filter");
    const content = fc.oneof(fc.string(), fc.constantFrom('"length"', "length", "max_tokens"));
    fc.assert(
      fc.property(fc.array(fc.tuple(reason, content), { minLength: 1, maxLength: 12 }), (parts) => {
        const es = parts.map(([f, c]) => chunk(f, c));
        const verdict = streamChecks(dialect, checks, jsons)!.truncated!(es);
        // Read in the last eight events (where a finish reason is, the usage chunk after it).
        const last = parts
          .slice(-8)
          .filter(([f]) => f !== null)
          .at(-1)?.[0];
        expect(verdict).toBe(last === "length");
      }),
    );
  });

  it("a dialect of a user's own, whose reader may spell a reason otherwise, is read by that reader", () => {
    // Mistral's "model_length" read as "length": no event's text names "length".
    const mistral = {
      ...dialect,
      answer: (events: readonly unknown[]) => ({
        text: "",
        toolCalls: [],
        finish: events.some((e) => JSON.stringify(e).includes('"model_length"'))
          ? "length"
          : undefined,
      }),
    };
    const o = streamChecks(mistral, checks, jsons)!;
    expect(o.truncated!([chunk("model_length")])).toBe(true);
  });
});
