import type { RunLimits } from "./limits.ts";
import type { ToolMemo } from "./tool-memo.ts";

/** The parts of a Run that the policy and the tool guard work with. Not exported from the
 * package: a user sees a Run's caps, stats and ledgers, not its levers. */
export interface RunParts {
  readonly limits: RunLimits;
  readonly memo: ToolMemo;
}

const parts = new WeakMap<object, RunParts>();

export function registerRun(run: object, p: RunParts): void {
  parts.set(run, p);
}

/** The parts of `run`, or undefined when it is not a Run. */
export function partsOf(run: unknown): RunParts | undefined {
  return run !== null && typeof run === "object" ? parts.get(run) : undefined;
}

export const isRun = (x: unknown): boolean => partsOf(x) !== undefined;
