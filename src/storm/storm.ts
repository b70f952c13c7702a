import { opt, parseOptions, type Rule } from "../internal.ts";
import type { Arrival } from "./arrivals.ts";
import { stackRule } from "./config.ts";
import type { StackResult } from "./metrics.ts";
import { ALL_SCENARIOS, SCENARIO_NAMES, type Scenario } from "./scenarios.ts";
import { capacityGoodput, simulate } from "./simulate.ts";
import { STACKS } from "./stacks.ts";
import { withArrivals } from "./traces.ts";
import type { StormStack } from "./types.ts";

/** Options of `runStorm`. */
export interface StormOptions {
  /** Scenarios: built-in names (default: the eight of `SCENARIO_NAMES`; `incident-long`
   * too, when named) or scenarios of your own making (`replayScenarios(dir)`'s). */
  scenarios?: (string | Scenario)[];
  /** A request log replayed in each scenario (`loadArrivals(file)`): each request a turn of
   * one call at its own time with its own tokens, the provider scaled to its load. */
  arrivals?: readonly Arrival[];
  /** Stacks to compare (default: the built-ins). */
  stacks?: readonly StormStack[];
  seed?: number;
  /** Told as each scenario × stack finishes. */
  onProgress?: (scenario: string, stack: string, done: number) => void;
}

const isScenario = (x: unknown): x is Scenario => {
  const s = x as Partial<Scenario> | null;
  return (
    typeof s?.name === "string" &&
    typeof s.durationS === "number" &&
    typeof s.provider === "object" &&
    typeof s.trigger === "object" &&
    typeof s.users === "object"
  );
};
const scenarioRule: Rule<string | Scenario> = (v, name, x) =>
  isScenario(x) ? x : v.oneOf(name, x, Object.keys(ALL_SCENARIOS));
const isArrival = (a: unknown) =>
  typeof (a as Arrival | null)?.atMs === "number" &&
  typeof (a as Arrival).inputTokens === "number" &&
  typeof (a as Arrival).outputTokens === "number";

const OPTIONS = {
  scenarios: opt.list(scenarioRule),
  arrivals: opt.any<readonly Arrival[]>(
    (x) => Array.isArray(x) && x.length > 0 && x.every(isArrival),
    "arrivals ({ atMs, inputTokens, outputTokens }, loadArrivals(file)), at least one",
  ),
  stacks: opt.list(stackRule),
  seed: opt.int({ default: 1 }),
  onProgress: opt.fn<NonNullable<StormOptions["onProgress"]>>(),
};

/** One scenario's results, stack by stack. */
export interface ScenarioReport {
  /** The scenario (a replay's requests are not repeated here: `replayed` counts them). */
  scenario: Omit<Scenario, "prices" | "arrivals"> & { prices: Scenario["prices"] };
  /** A replay: how many requests its log held. */
  replayed?: number;
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
  const chosen = (o.scenarios ?? SCENARIO_NAMES).map((s) =>
    typeof s === "string" ? ALL_SCENARIOS[s]! : s,
  );
  const stacks = o.stacks ?? STACKS;
  const scenarios: ScenarioReport[] = [];
  for (const given of chosen) {
    const scenario = o.arrivals === undefined ? given : withArrivals(given, o.arrivals);
    const name = scenario.name;
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
    const { arrivals, ...shown } = scenario;
    scenarios.push({
      scenario: shown,
      ...(arrivals !== undefined && { replayed: arrivals.length }),
      capacityGoodput: capacityGoodput(scenario),
      results,
    });
  }
  return { seed, scenarios };
}
