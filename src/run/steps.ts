import type { Clock } from "../core/clock.ts";
import { redact } from "../core/redact.ts";
import { describeError } from "../core/safe.ts";
import type { Journal, Lease, StepRecord } from "./journal.ts";

/** What a step needs of its run. */
export interface StepContext {
  readonly runId: string;
  readonly journal: Journal;
  readonly clock: Clock;
  /** Called when a step is answered from the journal. */
  readonly onReplay: () => void;
  /** The run's claim: every write carries it, and is refused once it was taken over. */
  readonly lease?: Lease | undefined;
  /** What a refused write throws. */
  readonly lost?: () => Promise<Error>;
}

/** Records a step under the run's lease; a write the journal refused (the run was taken
 * over) throws, so the worker that lost the run stops there. */
async function record(c: StepContext, r: StepRecord): Promise<void> {
  const written = await c.journal.put(r, c.lease);
  if (written === false) throw (await c.lost?.()) ?? new Error(`run "${c.runId}" was taken over`);
}

const describe = (error: unknown): string => redact(describeError(error)).slice(0, 2000);

/** The step's result as JSON, or a TypeError naming the step. */
function toJson(name: string, value: unknown): unknown {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(
      `Run.step "${name}": its result must be JSON to be journaled (${(error as Error).message})`,
    );
  }
  return json === undefined ? null : JSON.parse(json);
}

/**
 * Runs one step once per run id (docs/architecture.md, rule 14): a step the journal has as
 * "ok" returns its recorded result without running; otherwise it runs and its outcome is
 * recorded (a failure with secrets masked).
 */
export async function runStep<T>(
  c: StepContext,
  name: string,
  fn: () => T | PromiseLike<T>,
): Promise<T> {
  const prior = await c.journal.get(c.runId, name);
  if (prior?.status === "ok") {
    c.onReplay();
    return prior.value as T;
  }
  let value: T;
  try {
    value = await fn();
  } catch (error) {
    const at = c.clock.now();
    await record(c, { runId: c.runId, step: name, status: "failed", error: describe(error), at });
    throw error;
  }
  const json = toJson(name, value);
  await record(c, { runId: c.runId, step: name, status: "ok", value: json, at: c.clock.now() });
  return value;
}
