/** A tiny benchmark harness: interleaved rounds, median ns/op, ratios against a baseline
 * measured in the same run (the machines are shared and noisy; absolute numbers are not). */
export interface Case {
  name: string;
  /** Runs the operation `n` times. */
  run(n: number): Promise<void> | void;
}

export interface Result {
  name: string;
  /** The median over the rounds. */
  nsPerOp: number;
  /** Each round's ns/op, in order: a case's round and the baseline's ran side by side. */
  rounds: number[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

export async function measure(cases: Case[], opsPerRound: number, rounds = 9): Promise<Result[]> {
  // Warm-up: a whole round of each, so the code is compiled before the first one counts.
  for (const c of cases) await c.run(opsPerRound);
  const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  for (let r = 0; r < rounds; r++) {
    // Every other round runs the cases backwards: whichever runs second in a round (after
    // the other's garbage, on a warmer or busier machine) does so half the time.
    for (const c of r % 2 === 0 ? cases : [...cases].reverse()) {
      const t0 = process.hrtime.bigint();
      await c.run(opsPerRound);
      const ns = Number(process.hrtime.bigint() - t0) / opsPerRound;
      samples.get(c.name)!.push(ns);
    }
  }
  return cases.map((c) => {
    const s = samples.get(c.name)!;
    return { name: c.name, nsPerOp: median(s), rounds: s };
  });
}

/** The results per unit of an op (a chunk of an op that streams `n`). */
export const perUnit = (results: Result[], n: number): Result[] =>
  results.map((r) => ({
    name: r.name,
    nsPerOp: r.nsPerOp / n,
    rounds: r.rounds.map((x) => x / n),
  }));

/** Prints each case's median ns/op, and its ratio to the baseline: the median of the
 * rounds' ratios (each round against the baseline's beside it), so a machine that speeds
 * up or slows down during the run moves both sides of each ratio alike. */
export function report(title: string, results: Result[], baseline: string): void {
  const base = results.find((r) => r.name === baseline)!;
  console.log(`\n${title}`);
  for (const r of results) {
    const over = r.nsPerOp - base.nsPerOp;
    const ratio = median(r.rounds.map((x, i) => x / base.rounds[i]!));
    console.log(
      `  ${r.name.padEnd(34)} ${r.nsPerOp.toFixed(0).padStart(7)} ns/op   ${ratio.toFixed(2).padStart(6)}x   +${over.toFixed(0)} ns`,
    );
  }
}
