/** A tiny benchmark harness: interleaved rounds, median ns/op, ratios against a baseline
 * measured in the same run (the machines are shared and noisy; absolute numbers are not). */
export interface Case {
  name: string;
  /** Runs the operation `n` times. */
  run(n: number): Promise<void> | void;
}

export interface Result {
  name: string;
  nsPerOp: number;
}

export async function measure(cases: Case[], opsPerRound: number, rounds = 9): Promise<Result[]> {
  for (const c of cases) await c.run(Math.max(1, opsPerRound >> 2)); // warm-up
  const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      const t0 = process.hrtime.bigint();
      await c.run(opsPerRound);
      const ns = Number(process.hrtime.bigint() - t0) / opsPerRound;
      samples.get(c.name)!.push(ns);
    }
  }
  return cases.map((c) => {
    const s = samples.get(c.name)!.sort((a, b) => a - b);
    return { name: c.name, nsPerOp: s[s.length >> 1]! };
  });
}

export function report(title: string, results: Result[], baseline: string): void {
  const base = results.find((r) => r.name === baseline)!.nsPerOp;
  console.log(`\n${title}`);
  for (const r of results) {
    const over = r.nsPerOp - base;
    console.log(
      `  ${r.name.padEnd(34)} ${r.nsPerOp.toFixed(0).padStart(7)} ns/op   ${(r.nsPerOp / base).toFixed(2).padStart(6)}x   +${over.toFixed(0)} ns`,
    );
  }
}
