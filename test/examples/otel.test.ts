import { describe, expect, it } from "vitest";
import { main } from "../../examples/otel.mts";

describe("examples/otel.mts: a call with two 503s, traced", () => {
  it("one call span over three attempts and two waits, in the order they happened", async () => {
    const { spans, lines } = await main(() => {}, false);
    expect(spans.map((s) => s.name).sort()).toEqual([
      "breakwater.attempt 1",
      "breakwater.attempt 2",
      "breakwater.attempt 3",
      "chat gpt-4o",
    ]);
    expect(lines[0]).toMatch(/^ +0 ms chat gpt-4o \(\d+ ms\) breakwater.attempts=3/);
    expect(lines.filter((l) => l.includes("· breakwater.wait backoff"))).toHaveLength(2);
    expect(lines.at(-1)).toMatch(/breakwater.attempt 3 .*breakwater.outcome=ok/);
  });
});
