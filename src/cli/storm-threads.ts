import { availableParallelism } from "node:os";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { Arrival, Scenario, ScenarioReport, StormReport } from "../storm/index.ts";

/** What a worker thread is told: one scenario, and how to make the stacks again. */
export interface StormTask {
  /** A built-in's name, or a scenario of its own (a replay: plain data). */
  readonly scenario: string | Scenario;
  /** A request log to replay in it. */
  readonly arrivals?: readonly Arrival[] | undefined;
  readonly seed: number;
  /** The stacks, in the report's order: places in the built-ins and then the config's. */
  readonly stacks: readonly number[];
  /** A --config file whose stacks are among them. */
  readonly config: string | undefined;
}

/** As many threads as the machine has cores, never more than there are scenarios. */
export const defaultThreads = (scenarios: number) =>
  Math.max(1, Math.min(availableParallelism(), scenarios));

/**
 * The storm's scenarios across `threads` worker threads, each taking the next scenario when
 * it is free: a scenario (its calm run and every stack) is independent of the others and
 * deterministic for its seed, so the report is byte for byte what one thread makes, in
 * about 1/threads of the time. The worker is this module's sibling, .ts or .js as this is.
 */
export async function runStormThreads(
  o: Omit<StormTask, "scenario"> & { scenarios: readonly (string | Scenario)[]; threads: number },
  onProgress: (scenario: string, stack: string, done: number) => void,
): Promise<StormReport> {
  const ext = extname(fileURLToPath(import.meta.url));
  const script = new URL(`./storm-worker${ext}`, import.meta.url);
  const reports = new Array<ScenarioReport>(o.scenarios.length);
  const running = new Set<Worker>();
  let next = 0;
  const lane = async () => {
    while (next < o.scenarios.length) {
      const i = next++;
      const scenario = o.scenarios[i]!;
      const name = typeof scenario === "string" ? scenario : scenario.name;
      const task: StormTask = {
        scenario,
        seed: o.seed,
        stacks: o.stacks,
        config: o.config,
        arrivals: o.arrivals,
      };
      reports[i] = await new Promise<ScenarioReport>((resolve, reject) => {
        const worker = new Worker(script, { workerData: task });
        running.add(worker);
        worker.once("exit", () => running.delete(worker));
        worker.on("message", (m: { stack?: string; done?: number; report?: ScenarioReport }) => {
          if (m.report !== undefined) resolve(m.report);
          else onProgress(name, m.stack!, m.done!);
        });
        worker.on("error", reject);
        worker.on("exit", (code) =>
          reject(new Error(`the storm's thread for ${name} exited (${code}) without a report`)),
        );
      });
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(o.threads, o.scenarios.length) }, lane));
  } catch (error) {
    // One scenario failed: the others' threads would keep the process alive to no end.
    await Promise.all([...running].map((w) => w.terminate()));
    throw error;
  }
  return { seed: o.seed, scenarios: reports };
}
