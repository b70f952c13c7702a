// One scenario of `breakwater storm` in a worker thread: the stacks are made again here
// (the built-ins, and a --config file's), the scenario run as runStorm runs it, and its
// report posted back with progress on the way.
import { parentPort, workerData } from "node:worker_threads";
import { loadStacks, runStorm, STACKS } from "../storm/index.ts";
import type { StormTask } from "./storm-threads.ts";

const task = workerData as StormTask;
const all = [...STACKS, ...(task.config === undefined ? [] : await loadStacks(task.config))];
const stacks = task.stacks.map((i) => all[i]!);
const report = await runStorm({
  seed: task.seed,
  scenarios: [task.scenario],
  ...(task.arrivals !== undefined && { arrivals: task.arrivals }),
  stacks,
  onProgress: (_scenario, stack, done) => parentPort!.postMessage({ stack, done }),
});
parentPort!.postMessage({ report: report.scenarios[0] });
