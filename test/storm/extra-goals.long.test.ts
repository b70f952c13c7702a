import { existsSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runStorm, type ScenarioReport } from "../../src/storm/storm.ts";
import { replayScenarios, TRACE_FILES } from "../../src/storm/traces.ts";
import { GROUPS, PEERS, turnMisses } from "./goals.ts";

// Long tier: the scenarios outside the default eight, over seeds 1-3: an incident as long as
// a real one (80 minutes), and the replays of the Azure traces (../shared/traces, when they
// are there): some 50 simulated hours a seed, two minutes of CPU.
const TRACES = join(import.meta.dirname, "../../../shared/traces");
const replays = existsSync(join(TRACES, TRACE_FILES.code)) ? replayScenarios(TRACES) : [];

/** Where whole turns fall short of the group's best peer by more than a point, the most
 * points short over seeds 1-3, held as the bound (docs/storm.md, "Replays and the long
 * incident"). */
const SHORT_BY: Record<string, number> = {
  "incident-long/trigger/s20": 8,
  "incident-long/after/s20": 8,
  "incident-long/after/s30": 3,
  "incident-long/after/s60": 3,
  "incident-long/after/patience": 3,
  "replay-bursts/trigger/s20": 3,
  "replay-bursts/trigger/s30": 5,
  "replay-bursts/trigger/s60": 14,
  "replay-bursts/trigger/patience": 13,
  "replay-incident-latency-3x/after/s20": 3,
  "replay-incident-latency-3x/after/s30": 3,
  "replay-incident-latency-3x/after/s60": 3,
  "replay-incident-latency-3x/after/patience": 3,
};

describe.each([1, 2, 3])("the long incident and the replays, seed %i", (seed) => {
  let report: ScenarioReport[];
  beforeAll(async () => {
    report = (await runStorm({ seed, scenarios: ["incident-long", ...replays] })).scenarios;
  }, 600_000);

  it("whole turns: in every group, answered within 20, 30, 60 s and the patience >= the best peer's minus 1 point (where short, no more than over seeds 1-3)", () => {
    const misses = report.flatMap((s) =>
      GROUPS.flatMap((g) => turnMisses(s, g.row, g.peers, SHORT_BY)),
    );
    expect(misses).toEqual([]);
  });

  it("a fallback answers every turn of a real incident's length; retries alone cannot, and the stacks that retry hardest answer least", () => {
    const s = report.find((r) => r.scenario.name === "incident-long")!;
    const get = (n: string) => s.results.find((r) => r.stack === n)!;
    const patience = (n: string) => get(n).turns.trigger.within.patience;
    expect(patience("breakwater+fallback")).toBe(1);
    expect(patience("breakwater")).toBeLessThan(0.7);
    expect(patience("breakwater")).toBeGreaterThan(Math.max(...PEERS.map(patience)));
    expect(patience("naive")).toBeLessThan(patience("breakwater") - 0.2);
  });

  it("no refusals after the trouble but where the turns it answered come back at once (incident-long: at most 8%), no retry storm (load after <= 1.1x; incident-long 1.9x)", () => {
    for (const s of report) {
      const get = (n: string) => s.results.find((r) => r.stack === n)!;
      const bw = get("breakwater");
      const lowest = Math.min(...PEERS.map((n) => get(n).refusedAfterTrigger));
      const long = s.scenario.name === "incident-long";
      expect(bw.refusedAfterTrigger, s.scenario.name).toBeLessThanOrEqual(
        long ? 0.08 : Math.max(0.005, lowest),
      );
      expect(bw.loadAfterTrigger, s.scenario.name).toBeLessThanOrEqual(long ? 1.9 : 1.1);
      expect(bw.duplicateSideEffects).toBe(0);
    }
  });

  it.runIf(replays.length > 0)(
    "replay-bursts: breakwater does not stretch a burst of 429s into a storm: nothing refused after the last burst, fewer requests a call than any peer that retries 429s",
    () => {
      const s = report.find((r) => r.scenario.name === "replay-bursts")!;
      const get = (n: string) => s.results.find((r) => r.stack === n)!;
      expect(get("breakwater").refusedAfterTrigger).toBe(0);
      for (const n of ["naive", "openai-sdk", "langchain", "openai-agents"])
        expect(get("breakwater").amplificationDuringTrigger, n).toBeLessThan(
          get(n).amplificationDuringTrigger,
        );
    },
  );
});
