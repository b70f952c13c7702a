import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { startFaultServer } from "../src/testing/fault-server/server.ts";
import { startRedis } from "../test/fixtures/redis.ts";

const run = promisify(execFile);
const WORKER = join(import.meta.dirname, "fleet-worker.ts");
const PROCESSES = 20;
const RATE = 1; // calls per second per process: 20 for the fleet
const BOOT_MS = 5000; // every process is up before the clock starts
const OUTAGE_AT = 3000;
const OUTAGE_MS = 6000;
const DURATION = 10_000;

/** What sharing buys a fleet (issue 18): 20 processes call the fault server at 1 call/s
 * each; 3 s in, every request gets 503 for 6 s. Each process has a retry budget of 10 and
 * a breaker that judges 20 outcomes over 3 s: its own, or the fleet's through Redis. Real
 * processes, a real redis-server, the fault server on loopback. */
export async function benchFleet(): Promise<void> {
  const redis = await startRedis();
  const title = `${PROCESSES} processes × ${RATE} call/s, every request 503 for ${OUTAGE_MS / 1000} s`;
  console.log(`\nfleet: ${title}`);
  try {
    for (const shared of [false, true]) {
      const server = await startFaultServer();
      const serverAt = Date.now();
      const startAt = serverAt + BOOT_MS;
      const prefix = `fleet${serverAt}`;
      const args = JSON.stringify({
        url: server.url,
        ...(shared && { redis: redis.url }),
        prefix,
        ratePerS: RATE,
        durationMs: DURATION,
        startAt,
      });
      const workers = Array.from({ length: PROCESSES }, () =>
        run(process.execPath, [WORKER, args], { timeout: 60_000 }),
      );
      const outageAt = startAt + OUTAGE_AT;
      setTimeout(
        () => server.setScript({ rules: [{ window: [0, OUTAGE_MS], status: 503 }] }),
        outageAt - Date.now(),
      );
      const reports = (await Promise.all(workers)).map((d) =>
        JSON.parse(d.stdout.trim().split("\n").at(-1)!),
      );
      const arrivals = server.stats().timeline.map((x) => serverAt + x.at - outageAt);
      await server.close();
      const within = (from: number, to: number) =>
        arrivals.filter((t) => t >= from && t < to).length;
      const opened = reports.map((r: { openedAt?: number }) =>
        r.openedAt === undefined ? Number.POSITIVE_INFINITY : r.openedAt - outageAt,
      );
      console.log(
        `  ${shared ? "shared (Redis)" : "each its own  "}  requests: the second before ${within(-1000, 0)}, the outage's 1st s ${within(0, 1000)}, 2nd s ${within(1000, 2000)}, all ${OUTAGE_MS / 1000} s ${within(0, OUTAGE_MS)};` +
          ` breaker open: first ${fmt(Math.min(...opened))}, every process ${fmt(Math.max(...opened))}`,
      );
    }
  } finally {
    await redis.stop();
  }
}

const fmt = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : "never");
