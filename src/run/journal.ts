/** One finished step of a run, as the journal keeps it. */
export interface StepRecord {
  readonly runId: string;
  readonly step: string;
  readonly status: "ok" | "failed";
  /** The step's result (JSON), when it succeeded. */
  readonly value?: unknown;
  /** What went wrong (secrets masked), when it failed. */
  readonly error?: string;
  /** When it finished, on the run's clock. */
  readonly at: number;
}

/**
 * Where a run records its finished steps, so that a run started again with the same id
 * resumes at the step that failed instead of from the start (docs/architecture.md,
 * rule 14). In-memory and SQLite (node:sqlite) journals ship; the interface is what a
 * Postgres or Redis one implements.
 */
export interface Journal {
  /** The step's record, if the run finished it. */
  get(runId: string, step: string): StepRecord | undefined | Promise<StepRecord | undefined>;
  /** Records a step. */
  put(record: StepRecord): void | Promise<void>;
  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] | Promise<StepRecord[]>;
}

/** A journal in this process's memory: resumes a run within one process. */
export class MemoryJournal implements Journal {
  readonly #records = new Map<string, StepRecord>();

  /** The step's record, if the run finished it. */
  get(runId: string, step: string): StepRecord | undefined {
    return this.#records.get(`${runId}\u0000${step}`);
  }

  /** Records a step. */
  put(record: StepRecord): void {
    this.#records.set(`${record.runId}\u0000${record.step}`, record);
  }

  /** Every recorded step of a run, in the order they ran. */
  steps(runId: string): StepRecord[] {
    return [...this.#records.values()].filter((r) => r.runId === runId).sort((a, b) => a.at - b.at);
  }
}
