import { SCENARIOS, type Scenario } from "../src/storm/scenarios.ts";
import { simulate } from "../src/storm/simulate.ts";
import { STACKS } from "../src/storm/stacks.ts";

/** Simulation speed (issue 7): 200 conversations over 10 simulated minutes, per stack.
 * Target: under 5 s of wall time each. */
export async function benchStorm(): Promise<void> {
  const base = SCENARIOS["outage-503"]!;
  const tenMinutes: Scenario = {
    ...base,
    durationS: 600,
    trigger: { ...base.trigger, startS: 60, endS: 420 },
  };
  console.log(
    "\nstorm speed: 200 conversations, 10 simulated minutes (outage-503 shape), one stack at a time",
  );
  for (const stack of STACKS) {
    const t0 = performance.now();
    const r = await simulate(tenMinutes, stack, { seed: 1 });
    const wall = (performance.now() - t0) / 1000;
    console.log(
      `  ${stack.name.padEnd(11)} ${wall.toFixed(2).padStart(6)} s wall  ${Math.round(600 / wall)
        .toString()
        .padStart(
          5,
        )} simulated s per wall s  (${r.providerRequests} requests, ${r.logicalCalls} calls)`,
    );
  }
}
