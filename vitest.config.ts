import { readFileSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { LONG, OWN_PROCESS } from "./test/own-process.ts";

/** `import "breakwater/..."` (the examples, as users write it) resolves to the sources: the
 * package's own `breakwater-source` export condition, as aliases. */
const pkg = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8"));
const alias = Object.entries(pkg.exports as Record<string, { "breakwater-source"?: string }>)
  .filter(([, target]) => typeof target === "object" && target["breakwater-source"])
  .map(([path, target]) => ({
    find: new RegExp(`^${`breakwater${path.slice(1)}`.replace(/\//g, "\\/")}$`),
    replacement: new URL(target["breakwater-source"]!, import.meta.url).pathname,
  }));

// The suite starts a few hundred Node processes on the sources (kill-and-resume workers, the
// CLI): Node's compile cache keeps their stripped and compiled modules between starts (keyed
// by content, so an edit is never served stale), which halves each start.
process.env.NODE_COMPILE_CACHE ??= new URL(
  "./node_modules/.cache/node-compile-cache",
  import.meta.url,
).pathname;

/** The files that take longest, longest first: started first, so that no minute-long file
 * is left to run alone at the end (with no timings kept, as on a fresh clone, vitest starts
 * the largest files first, and these are some of the smallest). */
const LONGEST = [
  /package\/consumer\.long\.test/,
  /storm\/goals-\d/,
  /docs\/readme\.test/,
  /engines\/(restate|dbos)\./,
  /storm\/peers-2026\.test/,
  /run\/durable-agent\./,
  /run\/journal\.process\./,
  /gateway\/gateway\.test/,
  /run\/postgres-journal\.test/,
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = LONGEST.findIndex((re) => re.test(f.moduleId));
      return i === -1 ? LONGEST.length : i;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  resolve: { alias },
  test: {
    testTimeout: 60_000,
    pool: "forks",
    // Tests marked concurrent wait on real packages' backoff, not on CPU: all of a file's at once.
    maxConcurrency: 20,
    sequence: { sequencer: LongestFirst },
    // Both cores: the storm's goal tests are CPU-bound and independent of the rest.
    maxWorkers: 2,
    // Leak tests collect garbage on purpose (abandoned streams, bounded ledgers). The storm's
    // simulations make short-lived objects by the million: semi-spaces of 64 MB (V8's are
    // 16) take a goal file from 72 s to 60 s.
    execArgv: ["--expose-gc", "--max-semi-space-size=64"],
    // Two tiers (README, "Contributing"): `npm test` runs the projects "shared" and "own",
    // every test that proves behaviour, within 4 minutes on 2 cores; `npm run test:long` runs
    // "long", the proofs that need many repetitions or a fresh install (`*.long.test.ts`, each
    // saying in its header why it is long). The files share their worker processes, one after
    // another: a fresh process per file started Node and loaded the sources again each time, a
    // quarter of the suite's CPU; those that set what a process holds for everyone do not.
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: [...OWN_PROCESS, LONG],
          isolate: false,
        },
      },
      { extends: true, test: { name: "own", isolate: true, include: OWN_PROCESS } },
      { extends: true, test: { name: "long", include: [LONG], isolate: false } },
    ],
  },
});
