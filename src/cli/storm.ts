import { access, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import {
  ALL_SCENARIOS,
  type Arrival,
  ArrivalsError,
  EXTRA_SCENARIOS,
  htmlReport,
  loadArrivals,
  loadStacks,
  markdownTables,
  replayScenarios,
  runStorm,
  SCENARIO_NAMES,
  type Scenario,
  STACKS,
  type StormReport,
  type StormStack,
  TRACE_FILES,
  textTable,
} from "../storm/index.ts";
import { integer, parse, UsageError, writable } from "./args.ts";
import { progressBar } from "./progress.ts";
import { defaultThreads, runStormThreads } from "./storm-threads.ts";

export const STORM_USAGE = `usage: breakwater storm [--scenario a,b] [--stacks a,b] [--config stacks.mjs]
                       [--seed N] [--threads N] [--json file] [--html file] [--markdown]
                       [--traces dir] [--arrivals log.csv [--time-column C]
                       [--input-column C] [--output-column C]]

Simulates provider trouble in virtual time and compares retry stacks side by side:
the same users and the same trouble, each stack's real retry code.
  scenarios: ${SCENARIO_NAMES.join(", ")} (default: these eight);
             also ${Object.keys(EXTRA_SCENARIOS).join(", ")}, and with --traces the replays
             (replay-bursts, replay-incident-*) of the Azure traces found in dir
             (${TRACE_FILES.code}, ${TRACE_FILES.chat})
  stacks:    ${STACKS.map((s) => s.name).join(", ")} (default: all), plus any from --config
  arrivals:  your own request log, replayed in each scenario: a CSV with a header, a request
             a line: its arrival time (a date-time or seconds) and its input and output
             tokens (columns TIMESTAMP, ContextTokens, GeneratedTokens unless named)
  threads:   scenarios run side by side, one per thread (default: one per core, here
             ${defaultThreads(SCENARIO_NAMES.length)}); the report is the same whatever the number`;

export async function stormCommand(argv: string[], out: (s: string) => void): Promise<number> {
  const values = parse("storm", argv, {
    scenario: { type: "string" },
    stacks: { type: "string" },
    config: { type: "string" },
    seed: { type: "string" },
    threads: { type: "string" },
    json: { type: "string" },
    html: { type: "string" },
    markdown: { type: "boolean" },
    traces: { type: "string" },
    arrivals: { type: "string" },
    "time-column": { type: "string" },
    "input-column": { type: "string" },
    "output-column": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(STORM_USAGE);
    return 0;
  }
  // The simulator's random source is 32-bit: a larger seed would only alias a smaller one.
  const seed = integer("seed", values.seed, 1, 0, 2 ** 32 - 1);
  const replays = values.traces === undefined ? [] : tracesIn(values.traces);
  const scenarios = scenariosNamed(values.scenario, replays);
  const threads = integer("threads", values.threads, defaultThreads(scenarios.length), 1, 256);
  const arrivals = values.arrivals === undefined ? undefined : arrivalsOf(values);
  await writable("json", values.json); // checked before the simulation, not after it
  await writable("html", values.html);
  const all = [...STACKS, ...(values.config ? await configStacks(values.config) : [])];
  const stacks = chosen(all, values.stacks);
  const bar = progressBar();
  const started = performance.now();
  const onProgress = (scenario: string, stack: string, done: number) =>
    bar.update(`${scenario} / ${stack}`, done);
  const report =
    threads === 1
      ? await runStorm({ seed, stacks, scenarios, ...(arrivals && { arrivals }), onProgress })
      : await runStormThreads(
          {
            seed,
            scenarios,
            stacks: stacks.map((s) => all.indexOf(s)),
            config: values.config && resolve(values.config),
            arrivals,
            threads,
          },
          onProgress,
        );
  bar.done();
  out(values.markdown ? markdownTables(report) : textTable(report));
  out(pace(report, (performance.now() - started) / 1000));
  await write(out, values.json, () => JSON.stringify(report));
  await write(out, values.html, () => htmlReport(report));
  return 0;
}

/** The replay scenarios of the traces in `dir` (`--traces`): none found is a mistake. */
function tracesIn(dir: string): Scenario[] {
  const found = replayScenarios(dir);
  if (found.length === 0)
    throw new UsageError(
      `--traces ${dir}: neither ${TRACE_FILES.code} nor ${TRACE_FILES.chat} is there`,
    );
  return found;
}

/** The scenarios `--scenario` names (the default eight when it names none; the replays
 * when --traces was given and it names none), built-in or replayed. */
function scenariosNamed(given: string | undefined, replays: Scenario[]): (string | Scenario)[] {
  if (given === undefined) return replays.length > 0 ? replays : [...SCENARIO_NAMES];
  const known = [...Object.keys(ALL_SCENARIOS), ...replays.map((r) => r.name)];
  return given.split(",").map((raw) => {
    const name = raw.trim();
    const replay = replays.find((r) => r.name === name);
    if (replay !== undefined) return replay;
    if (name in ALL_SCENARIOS) return name;
    const hint =
      name.startsWith("replay-") && replays.length === 0 ? " (replays need --traces dir)" : "";
    throw new UsageError(
      `--scenario: unknown scenario ${JSON.stringify(name)}; one of ${known.join(", ")}${hint}`,
    );
  });
}

/** The request log `--arrivals` names, read with the columns the flags name. */
function arrivalsOf(values: Record<string, string | boolean | undefined>): Arrival[] {
  const column = (flag: string) => values[flag] as string | undefined;
  const columns = {
    ...(column("time-column") && { time: column("time-column") }),
    ...(column("input-column") && { input: column("input-column") }),
    ...(column("output-column") && { output: column("output-column") }),
  };
  try {
    return loadArrivals(values.arrivals as string, columns);
  } catch (error) {
    if (error instanceof ArrivalsError) throw new UsageError(`--${error.message}`);
    throw error;
  }
}

/** The stacks `--stacks` names (all when it names none). */
function chosen(stacks: readonly StormStack[], names: string | undefined): StormStack[] {
  if (!names) return [...stacks];
  const wanted = names.split(",").map((s) => s.trim());
  for (const w of wanted)
    if (!stacks.some((s) => s.name === w))
      throw new UsageError(
        `--stacks: unknown stack ${JSON.stringify(w)}; one of ${stacks.map((s) => s.name).join(", ")}`,
      );
  return stacks.filter((s) => wanted.includes(s.name));
}

/** How much simulated time the storm covered, and how fast. */
function pace(report: StormReport, wallS: number): string {
  const simulated = report.scenarios.reduce(
    (s, r) => s + r.scenario.durationS * r.results.length,
    0,
  );
  return `simulated ${simulated} s of provider trouble in ${wallS.toFixed(1)} s (${Math.round(simulated / wallS)} simulated s per wall s)`;
}

/** Writes an output the user asked for. */
async function write(out: (s: string) => void, file: string | undefined, text: () => string) {
  if (!file) return;
  await writeFile(file, text());
  out(`wrote ${file}`);
}

/** The stacks of a --config file; a missing file or one that throws is named, in one line. */
async function configStacks(file: string) {
  try {
    await access(file);
  } catch {
    throw new UsageError(`--config ${file}: no such file`);
  }
  try {
    return await loadStacks(file);
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
    throw new UsageError(
      message.startsWith(file) ? `--config ${message}` : `--config ${file}: ${message}`,
    );
  }
}
