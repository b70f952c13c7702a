import { access, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import {
  htmlReport,
  loadStacks,
  markdownTables,
  runStorm,
  SCENARIO_NAMES,
  STACKS,
  type StormReport,
  type StormStack,
  textTable,
} from "../storm/index.ts";
import { integer, parse, UsageError, writable } from "./args.ts";
import { progressBar } from "./progress.ts";
import { defaultThreads, runStormThreads } from "./storm-threads.ts";

export const STORM_USAGE = `usage: breakwater storm [--scenario a,b] [--stacks a,b] [--config stacks.mjs]
                       [--seed N] [--threads N] [--json file] [--html file] [--markdown]

Simulates provider trouble in virtual time and compares retry stacks side by side:
the same users and the same trouble, each stack's real retry code.
  scenarios: ${SCENARIO_NAMES.join(", ")} (default: all)
  stacks:    ${STACKS.map((s) => s.name).join(", ")} (default: all), plus any from --config
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
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(STORM_USAGE);
    return 0;
  }
  // The simulator's random source is 32-bit: a larger seed would only alias a smaller one.
  const seed = integer("seed", values.seed, 1, 0, 2 ** 32 - 1);
  const scenarios = values.scenario?.split(",").map((s) => s.trim());
  const threads = integer(
    "threads",
    values.threads,
    defaultThreads(scenarios?.length ?? SCENARIO_NAMES.length),
    1,
    256,
  );
  for (const sc of scenarios ?? [])
    if (!SCENARIO_NAMES.includes(sc))
      throw new UsageError(
        `--scenario: unknown scenario ${JSON.stringify(sc)}; one of ${SCENARIO_NAMES.join(", ")}`,
      );
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
      ? await runStorm({ seed, stacks, ...(scenarios && { scenarios }), onProgress })
      : await runStormThreads(
          {
            seed,
            scenarios: scenarios ?? SCENARIO_NAMES,
            stacks: stacks.map((s) => all.indexOf(s)),
            config: values.config && resolve(values.config),
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
