import { describe, expect, it } from "vitest";
import { main } from "../../examples/agent.mts";

describe("examples/agent.mts: one turn with everything on, against the real OpenAI client", () => {
  it("retries the 503, replays the charge by its key, keeps the interrupted reply, and counts it all on the run", async () => {
    const lines: string[] = [];
    const { plan, refund, reply, stats, run } = await main((l) => lines.push(l));
    expect(plan).toBe("The fault server says hello, one word at a time.");
    expect(refund).toMatchObject({ status: "ok", executionId: 1, replayed: true });
    expect(reply).toEqual({ text: "The fault server ", complete: false });
    expect(stats.byRoute.openai).toEqual({
      requests: 3,
      byOutcome: { "503": 1, "200": 1, cut: 1 },
    });
    expect(stats.tools).toMatchObject({ executed: 1, duplicatesPrevented: 1, duplicateEffects: 0 });
    // plan (2 attempts), refund (2 attempts), reply (1 attempt): all drawn on the run
    expect(run.stats).toMatchObject({ calls: 3, attempts: 5, retries: 2 });
    expect(lines.some((l) => l.startsWith("reply interrupted"))).toBe(true);
    expect(lines.join("\n")).not.toContain("sk-example-not-a-real-key");
  });
});
