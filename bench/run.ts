import { benchExecute } from "./execute.bench.ts";
import { benchStream } from "./stream.bench.ts";

const only = process.argv[2];
const benches: Record<string, () => Promise<void>> = { execute: benchExecute, stream: benchStream };
for (const [name, fn] of Object.entries(benches)) {
  if (only === undefined || only === name) await fn();
}
