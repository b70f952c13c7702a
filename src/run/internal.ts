import type { CallLog, CallSlot } from "./calls.ts";
import type { RunLimits } from "./limits.ts";
import type { RequestKey } from "./request-key.ts";
import type { ToolMemo } from "./tool-memo.ts";

/** The parts of a Run that the policy and the tool guard work with. Not exported from the
 * package: a user sees a Run's caps, stats and ledgers, not its levers. */
export interface RunParts {
  readonly limits: RunLimits;
  readonly memo: ToolMemo;
  /** Its journaled calls, when it has a journal. */
  readonly calls: CallLog | undefined;
  /** The user's reading of a model call's request before the journal names it. */
  readonly requestKey: RequestKey | undefined;
}

/** Reads a Run's parts (the Run class sets it when it loads): its own private field, not a
 * WeakMap entry per run, which a process making a run per request pays for in every
 * garbage collection. */
let read: (run: object) => RunParts | undefined = () => undefined;

export function readRunParts(reader: (run: object) => RunParts | undefined): void {
  read = reader;
}

/** The parts of `run`, or undefined when it is not a Run. */
export function partsOf(run: unknown): RunParts | undefined {
  return run !== null && typeof run === "object" ? read(run) : undefined;
}

export const isRun = (x: unknown): boolean => partsOf(x) !== undefined;

/**
 * The place of the next model or tool call of `run` in its journal (docs/architecture.md,
 * rule 14): undefined when `run` is no Run, has no journal, or the call is made inside
 * one of its steps. `digest` names the request (read through the run's `requestKey`, if
 * any): the same request at the same place on resume is answered from the journal.
 */
export function journaled(
  run: unknown,
  kind: string,
  digest: (key: RequestKey | undefined) => string,
): Promise<CallSlot | undefined> | undefined {
  const p = partsOf(run);
  // The request is named only when it is journaled.
  return p?.calls?.open(kind, digest(p.requestKey));
}
