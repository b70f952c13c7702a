import { benchExecute } from "./execute.bench.ts";

const only = process.argv[2];
const benches: Record<string, () => Promise<void>> = { execute: benchExecute };
for (const [name, fn] of Object.entries(benches)) {
  if (only === undefined || only === name) await fn();
}
