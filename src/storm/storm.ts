import { opt, parseOptions } from "../internal.ts";
import { stackRule } from "./config.ts";
import type { StackResult } from "./metrics.ts";
import { SCENARIOS, type Scenario } from "./scenarios.ts";
import { capacityGoodput, simulate } from "./simulate.ts";
import { STACKS } from "./stacks.ts";
import type { StormStack } from "./types.ts";

/** Options of `runStorm`. */
export interface StormOptions {
  /** Scenario names (default: all). */
  scenarios?: string[];
  /** Stacks to compare (default: the built-ins). */
  stacks?: readonly StormStack[];
  seed?: number;
  /** Told as each scenario × stack finishes. */
  onProgress?: (scenario: string, stack: string, done: number) => void;
}

const OPTIONS = {
  scenarios: opt.list(opt.oneOf(Object.keys(SCENARIOS))),
  stacks: opt.list(stackRule),
  seed: opt.int({ default: 1 }),
  onProgress: opt.fn<NonNullable<StormOptions["onProgress"]>>(),
};

/** One scenario's results, stack by stack. */
export interface ScenarioReport {
  scenario: Omit<Scenario, "prices"> & { prices: Scenario["prices"] };
  /** What the provider could answer per second during the trigger (calls/s). */
  capacityGoodput: number;
  results: StackResult[];
}

/** Everything a storm found, per scenario and stack. */
export interface StormReport {
  seed: number;
  scenarios: ScenarioReport[];
}

/** Runs every scenario against every stack. Deterministic: one seed, one report. */
export async function runStorm(options: StormOptions = {}): Promise<StormReport> {
  const o = parseOptions("storm", OPTIONS, options);
  const seed = o.seed;
  const names = o.scenarios ?? Object.keys(SCENARIOS);
  const stacks = o.stacks ?? STACKS;
  const scenarios: ScenarioReport[] = [];
  for (const name of names) {
    const scenario = SCENARIOS[name]!;
    const results: StackResult[] = [];
    // With no trouble every stack sends the same requests: one calm run is the reference.
    const quiet = {
      ...scenario,
      trigger: { startS: scenario.trigger.startS, endS: scenario.trigger.startS },
    };
    const calm = (await simulate(quiet, stacks[0]!, { seed })).series.goodput;
    for (const stack of stacks) {
      const onProgress =
        options.onProgress && ((d: number) => options.onProgress!(name, stack.name, d));
      results.push(
        await simulate(scenario, stack, { seed, calm, ...(onProgress && { onProgress }) }),
      );
    }
    scenarios.push({ scenario, capacityGoodput: capacityGoodput(scenario), results });
  }
  return { seed, scenarios };
}
