import { benchAdapter } from "./adapter.bench.ts";
import { benchDeadline } from "./deadline.bench.ts";
import { benchExecute } from "./execute.bench.ts";
import { benchFleet } from "./fleet.bench.ts";
import { benchGateway } from "./gateway.bench.ts";
import { benchRedis } from "./redis.bench.ts";
import { benchSoak } from "./soak.bench.ts";
import { benchStorm } from "./storm.bench.ts";
import { benchStream } from "./stream.bench.ts";

const only = process.argv[2];
const benches: Record<string, () => Promise<void>> = {
  execute: benchExecute,
  stream: benchStream,
  deadline: benchDeadline,
  adapter: benchAdapter,
  storm: benchStorm,
  soak: benchSoak,
  redis: benchRedis,
  fleet: benchFleet,
  gateway: benchGateway,
};
if (only !== undefined && !Object.hasOwn(benches, only)) {
  console.error(
    `unknown benchmark ${JSON.stringify(only)}; one of ${Object.keys(benches).join(", ")}`,
  );
  process.exit(2);
}
for (const [name, fn] of Object.entries(benches)) {
  if (only === undefined || only === name) await fn();
}
