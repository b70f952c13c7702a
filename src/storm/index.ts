/**
 * The storm: the outage simulator that replays provider trouble against retry stacks
 * in virtual time (what `breakwater storm` runs).
 *
 * @example
 * ```ts
 * import { markdownTables, runStorm } from "breakwater/storm";
 *
 * const report = await runStorm({ scenarios: ["blip"], seed: 1 });
 * console.log(markdownTables(report));
 * ```
 * @module breakwater/storm
 */
export {
  type Arrival,
  type ArrivalColumns,
  ArrivalsError,
  loadArrivals,
  parseArrivals,
} from "./arrivals.ts";
export { loadStacks } from "./config.ts";
export { loadAfter, recoverySeconds, type Series, type StackResult } from "./metrics.ts";
export { htmlReport } from "./report-html.ts";
export { markdownTables, textTable } from "./report-text.ts";
export {
  ALL_SCENARIOS,
  EXTRA_SCENARIOS,
  type ProviderSpec,
  SCENARIO_NAMES,
  SCENARIOS,
  type Scenario,
  type ToolSpec,
  type TriggerSpec,
  type UsersSpec,
} from "./scenarios.ts";
export { expectedConversationS, type SimulateOptions, simulate } from "./simulate.ts";
export {
  aiFallback,
  aiRetry,
  aiRetryFallback,
  aiSdk,
  breakwater,
  breakwaterFallback,
  langchain,
  langchainV1,
  langchainV1Fallback,
  litellmRouter,
  litellmRouterFallback,
  naive,
  openaiAgents,
  openaiSdk,
  STACKS,
} from "./stacks.ts";
export { runStorm, type ScenarioReport, type StormOptions, type StormReport } from "./storm.ts";
export { INCIDENTS, replayScenarios, TRACE_FILES, withArrivals } from "./traces.ts";
export * from "./types.ts";
