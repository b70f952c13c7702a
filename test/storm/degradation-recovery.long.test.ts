import { describe, expect, it } from "vitest";
import { STACKS } from "../../src/storm/stacks.ts";
import { runStorm } from "../../src/storm/storm.ts";
import { PEERS } from "./goals.ts";

// Long tier: degradation's recovery over 20 seeds (20 storms of one scenario, half a minute).
// Every stack's recovery there is 20-33 s and as noisy from seed to seed as it is between
// stacks: the jobs begun at 3x latency hold the provider's slots after the trigger, whatever
// the client does. So the defaults are compared with each single-upstream peer paired, seed by
// seed: their mean difference may not exceed max(1 s, two standard errors of it).
const SEEDS = Array.from({ length: 20 }, (_, i) => i + 1);

describe("degradation: recovery, paired over seeds 1-20", () => {
  it("breakwater's is not later than any single-upstream peer's by more than max(1 s, 2 standard errors)", async () => {
    const stacks = STACKS.filter((s) => s.name === "breakwater" || PEERS.includes(s.name));
    const bySeed = [];
    for (const seed of SEEDS) {
      const [s] = (await runStorm({ seed, scenarios: ["degradation"], stacks })).scenarios;
      const at = (name: string) => s!.results.find((r) => r.stack === name)!.recoveryS;
      bySeed.push(new Map([...PEERS, "breakwater"].map((n) => [n, at(n)])));
    }
    const lines: string[] = [];
    for (const peer of PEERS) {
      // A stack that never recovers within the run counts as the run's length.
      const d = bySeed.map((m) => (m.get("breakwater") ?? 450) - (m.get(peer) ?? 450));
      const mean = d.reduce((a, b) => a + b, 0) / d.length;
      const sd = Math.sqrt(d.reduce((a, b) => a + (b - mean) ** 2, 0) / (d.length - 1));
      const se = sd / Math.sqrt(d.length);
      lines.push(`${peer}: ${mean.toFixed(2)} s (se ${se.toFixed(2)})`);
      expect(mean, peer).toBeLessThanOrEqual(Math.max(1, 2 * se));
    }
    console.log(
      `degradation recovery, breakwater minus each peer over seeds 1-20: ${lines.join("; ")}`,
    );
  }, 300_000);
});
