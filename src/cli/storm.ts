import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import {
  htmlReport,
  loadStacks,
  markdownTables,
  runStorm,
  SCENARIO_NAMES,
  STACKS,
  textTable,
} from "../storm/index.ts";
import { progressBar } from "./progress.ts";

export const STORM_USAGE = `usage: breakwater storm [--scenario a,b] [--stacks a,b] [--config stacks.mjs]
                       [--seed N] [--json file] [--html file] [--markdown]

Simulates provider trouble in virtual time and compares retry stacks side by side:
the same users and the same trouble, each stack's real retry code.
  scenarios: ${SCENARIO_NAMES.join(", ")} (default: all)
  stacks:    ${STACKS.map((s) => s.name).join(", ")} (default: all), plus any from --config`;

export async function stormCommand(argv: string[], out: (s: string) => void): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      scenario: { type: "string" },
      stacks: { type: "string" },
      config: { type: "string" },
      seed: { type: "string" },
      json: { type: "string" },
      html: { type: "string" },
      markdown: { type: "boolean" },
      help: { type: "boolean" },
    },
    strict: true,
  });
  if (values.help) {
    out(STORM_USAGE);
    return 0;
  }
  const seed = values.seed === undefined ? 1 : Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0)
    throw new TypeError(`--seed must be an integer >= 0; got ${values.seed}`);
  let stacks = [...STACKS, ...(values.config ? await loadStacks(values.config) : [])];
  if (values.stacks) {
    const wanted = values.stacks.split(",").map((s) => s.trim());
    for (const w of wanted) {
      if (!stacks.some((s) => s.name === w))
        throw new TypeError(
          `--stacks: unknown stack ${JSON.stringify(w)}; one of ${stacks.map((s) => s.name).join(", ")}`,
        );
    }
    stacks = stacks.filter((s) => wanted.includes(s.name));
  }
  const scenarios = values.scenario?.split(",").map((s) => s.trim());
  const bar = progressBar();
  const started = performance.now();
  const report = await runStorm({
    seed,
    stacks,
    ...(scenarios && { scenarios }),
    onProgress: (scenario, stack, done) => bar.update(`${scenario} / ${stack}`, done),
  });
  bar.done();
  const wallS = (performance.now() - started) / 1000;
  out(values.markdown ? markdownTables(report) : textTable(report));
  const simulated = report.scenarios.reduce(
    (s, r) => s + r.scenario.durationS * r.results.length,
    0,
  );
  out(
    `simulated ${simulated} s of provider trouble in ${wallS.toFixed(1)} s (${Math.round(simulated / wallS)} simulated s per wall s)`,
  );
  if (values.json) {
    await writeFile(values.json, JSON.stringify(report));
    out(`wrote ${values.json}`);
  }
  if (values.html) {
    await writeFile(values.html, htmlReport(report));
    out(`wrote ${values.html}`);
  }
  return 0;
}
