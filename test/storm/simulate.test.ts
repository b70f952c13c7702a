import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadStacks } from "../../src/storm/config.ts";
import { recoverySeconds } from "../../src/storm/metrics.ts";
import { markdownTables, textTable } from "../../src/storm/report-text.ts";
import { SCENARIOS, type Scenario } from "../../src/storm/scenarios.ts";
import { simulate } from "../../src/storm/simulate.ts";
import { breakwater, naive, openaiSdk, STACKS } from "../../src/storm/stacks.ts";
import { runStorm } from "../../src/storm/storm.ts";

/** A small outage: 100 conversations, half the fleet down from 30 s to 90 s. */
const small: Scenario = {
  ...SCENARIOS["outage-503"]!,
  name: "small-outage",
  durationS: 150,
  trigger: { startS: 30, endS: 90, errorRate: 0.5, errorStatus: 503, capacityFactor: 0.5 },
  provider: { ...SCENARIOS["outage-503"]!.provider, maxConcurrent: 65, maxQueue: 30 },
  users: { ...SCENARIOS["outage-503"]!.users, conversations: 100 },
};

describe("the storm", () => {
  it("is deterministic: the same seed gives byte-identical JSON, another seed does not", async () => {
    const opts = { scenarios: ["blip"], stacks: [openaiSdk, breakwater] };
    const a = JSON.stringify(await runStorm({ ...opts, seed: 7 }));
    const b = JSON.stringify(await runStorm({ ...opts, seed: 7 }));
    const c = JSON.stringify(await runStorm({ ...opts, seed: 8 }));
    expect(a).toBe(b);
    expect(c).not.toBe(a);
  });

  it("the same users meet every stack: calls match when nothing goes wrong", async () => {
    const quiet: Scenario = { ...small, trigger: { startS: 30, endS: 90 } };
    const results = await Promise.all(STACKS.map((s) => simulate(quiet, s, { seed: 3 })));
    const calls = new Set(results.map((r) => r.logicalCalls));
    expect(calls.size).toBe(1);
    for (const r of results) {
      // A hedge goes out for the slowest first tokens even when nothing is wrong: at most
      // its budget's 5% more requests.
      if (r.stack === "breakwater+hedge") expect(r.amplification).toBeLessThanOrEqual(1.05);
      else expect(r.amplification).toBe(1);
      expect(r.successRate).toBe(1);
      expect(r.recoveryS).toBe(0);
    }
  });

  it("in an outage the naive stack multiplies load; breakwater's admission keeps it within k = 2", async () => {
    const [n, o, b] = await Promise.all(
      [naive, openaiSdk, breakwater].map((s) => simulate(small, s, { seed: 1 })),
    );
    console.log(
      "small outage, requests per call in the trigger:",
      n!.amplificationDuringTrigger,
      o!.amplificationDuringTrigger,
      b!.amplificationDuringTrigger,
    );
    expect(n!.amplificationDuringTrigger).toBeGreaterThan(o!.amplificationDuringTrigger);
    expect(n!.amplificationDuringTrigger).toBeLessThanOrEqual(30); // 2 × 3 × 5
    expect(o!.amplificationDuringTrigger).toBeLessThanOrEqual(3);
    // Half the requests fail fast: retries flow (the upstream accepts half), but attempts
    // stay within about k = 2 times what it accepts, and nothing is left after the trigger.
    expect(b!.amplificationDuringTrigger).toBeGreaterThan(1.5);
    expect(b!.amplificationDuringTrigger).toBeLessThan(2.3);
    expect(b!.amplificationDuringTrigger).toBeLessThan(n!.amplificationDuringTrigger);
    // No retry storm after it: the users whose turns it finished come back for their next
    // turn (a little more than the SDK's), nothing like the naive stack's.
    expect(b!.loadAfterTrigger).toBeLessThanOrEqual(Math.max(1.1, o!.loadAfterTrigger + 0.1));
    expect(b!.loadAfterTrigger).toBeLessThan(n!.loadAfterTrigger);
    expect(b!.goodputDuringTrigger).toBeGreaterThanOrEqual(0.95 * o!.goodputDuringTrigger);
    // Time series are per second of the run and add up to the totals.
    expect(b!.series.requests).toHaveLength(small.durationS);
    expect(b!.series.requests.reduce((x, y) => x + y, 0)).toBe(b!.providerRequests);
    expect(b!.series.calls.reduce((x, y) => x + y, 0)).toBe(b!.logicalCalls);
    expect(b!.tokens.billed).toBeGreaterThanOrEqual(b!.tokens.used);
  }, 60_000);

  it("in the tool scenario keys prevent double charges that keyless retries cause", async () => {
    const tool = SCENARIOS["tool-deploy"]!;
    const [o, b] = await Promise.all(
      [openaiSdk, breakwater].map((s) => simulate(tool, s, { seed: 2 })),
    );
    expect(o!.duplicateSideEffects).toBeGreaterThan(0);
    expect(b!.duplicateSideEffects).toBe(0);
    // The keyed charge is retried through the deploy (rule 13): every charge lands, for no
    // more requests per charge that landed than the keyless decorator's.
    expect(b!.tool!.successRate).toBeGreaterThanOrEqual(0.995);
    expect(b!.tool!.successRate).toBeGreaterThan(o!.tool!.successRate);
    const perCharge = (r: typeof b) => r!.tool!.requests / (r!.tool!.calls * r!.tool!.successRate);
    expect(perCharge(b)).toBeLessThanOrEqual(perCharge(o));
  }, 60_000);

  it("recovery: until goodput's 10 s mean is back within the noise of its level and >= 95%", () => {
    const s: Scenario = { ...small, durationS: 60, trigger: { startS: 20, endS: 30 } };
    const at = (level: number, dip: number) => [
      ...Array(20).fill(level),
      ...Array(10).fill(0),
      ...Array(5).fill(dip),
      ...Array(25).fill(level),
    ];
    // Level 10/s: two standard errors of a 10 s mean are 2, so 8 counts as back.
    expect(recoverySeconds(at(10, 2), s)).toBe(3);
    // Level 1000/s: the noise is small, so 95% binds.
    expect(recoverySeconds(at(1000, 200), s)).toBe(5);
    const never = [...Array(20).fill(10), ...Array(40).fill(3)];
    expect(recoverySeconds(never, s)).toBeNull();
  });

  it("rejects unknown scenarios and bad seeds", async () => {
    await expect(runStorm({ scenarios: ["tsunami"] })).rejects.toThrow(
      /"scenarios\[0\]" must be one of "outage-503", .*; got "tsunami"/,
    );
    await expect(runStorm({ scenarios: ["toString"] })).rejects.toThrow(
      /"scenarios\[0\]" must be one of .*; got "toString"/,
    );
    await expect(runStorm({ seed: -1 })).rejects.toThrow(/"seed" must be an integer >= 0; got -1/);
  });

  it("loads the user's own stacks from a module, and says what is wrong with a bad one", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bw-stacks-"));
    const good = join(dir, "stacks.mjs");
    await writeFile(
      good,
      `export const stacks = [{ name: "no-retry", create: (ctx) => ({ model: (req, { signal }) => ctx.provider.call(req, signal) }) }];`,
    );
    const [stack] = await loadStacks(good);
    expect(stack!.name).toBe("no-retry");
    const r = await simulate(
      { ...small, trigger: { startS: 30, endS: 60, errorRate: 0.3 } },
      stack!,
      { seed: 1 },
    );
    expect(r.amplification).toBe(1);
    expect(r.successRate).toBeLessThan(1);
    const bad = join(dir, "bad.mjs");
    await writeFile(bad, `export default [{ name: "x" }];`);
    await expect(loadStacks(bad)).rejects.toThrow(/"stacks\[0\]\.create" must be a function/);
  });

  it("prints a table and Markdown with every stack and figure", async () => {
    const report = await runStorm({ scenarios: ["blip"], stacks: [naive, breakwater] });
    const text = textTable(report);
    expect(text).toMatch(/blip: 5 s of 20% errors/);
    expect(text).toMatch(/^\s+naive\s+\d+\s+\d+\s+\d\.\d\d/m);
    expect(text).toMatch(/^\s+breakwater\s+\d+/m);
    // The turn table: the same first turns under both stacks, the shares answered within T.
    const turns = text.slice(text.indexOf("whole turns"));
    const begun = report.scenarios[0]!.results.map((r) => r.turns.after.begun);
    expect(begun[0]).toBeGreaterThan(30);
    expect(new Set(begun).size).toBe(1);
    expect(turns).toMatch(/^\s+breakwater\s+\d+ \/ \d+\s+\d+\.\d%/m);
    const md = markdownTables(report);
    expect(md).toMatch(/\| stack \| calls \| requests \|/);
    expect(md).toMatch(/\| stack \| first turns \| in trigger ≤20 s \|/);
    // One row per table: per call, then whole turns.
    expect(md.split("\n").filter((l) => l.startsWith("| breakwater |"))).toHaveLength(2);
  });
});
