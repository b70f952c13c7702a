import { createClient } from "redis";
import { policy } from "../src/policy/policy.ts";
import { sharedState } from "../src/redis/index.ts";
import { startRedis } from "../test/fixtures/redis.ts";
import { type Case, measure, report } from "./harness.ts";

/** Shared state on a local Redis (issue 18): decisions per second through a shared budget,
 * sync round trips per second, and the success-path cost of a policy whose budget,
 * admission and breaker are shared, against the same policy with local ones. */
export async function benchRedis(): Promise<void> {
  const redis = await startRedis();
  const client = createClient({ url: redis.url, disableOfflineQueue: true });
  client.on("error", () => {});
  await client.connect();
  const shared = sharedState({ client, prefix: "bench", syncMs: 100 });
  try {
    // Retry decisions (any answer) per second: local, a subtraction on the lease.
    const budget = shared.budget("bench:budget", { maxTokens: 1e6, tokenRatio: 1 });
    await shared.fleet.sync();
    let decided = 0;
    const until = performance.now() + 1000;
    while (performance.now() < until) {
      for (let i = 0; i < 1000; i++) {
        budget.tryAcquire();
        budget.onSuccess();
        decided++;
      }
      await new Promise((r) => setImmediate(r)); // let the syncs run
    }
    console.log("\nshared state on a local redis-server");
    console.log(
      `  budget decisions: ${Math.round(decided).toLocaleString("en")}/s (target >= 20,000/s)`,
    );
    // Granted retries per second when a process asks for nothing else: each lease costs a
    // round trip, so the lease size sets the pace.
    for (const leaseTokens of [2, 10, 50]) {
      const b = shared.budget(`bench:lease${leaseTokens}`, {
        maxTokens: 1e6,
        tokenRatio: 1,
        leaseTokens,
      });
      await shared.fleet.sync();
      let granted = 0;
      const end = performance.now() + 1000;
      while (performance.now() < end) {
        if (b.tryAcquire()) granted++;
        else await shared.fleet.sync();
      }
      console.log(`  granted retries, lease of ${leaseTokens}: ${granted.toLocaleString("en")}/s`);
    }
    const syncs0 = shared.fleet.stats.syncs;
    const t0 = performance.now();
    for (let i = 0; i < 2000; i++) await shared.fleet.sync();
    const syncsPerS = ((shared.fleet.stats.syncs - syncs0) / (performance.now() - t0)) * 1000;
    console.log(
      `  sync round trips (every member, one Lua script each): ${Math.round(syncsPerS).toLocaleString("en")}/s`,
    );

    const work = async () => 42;
    const local = policy({ maxAttempts: 3, breaker: { consecutiveFailures: 5 } });
    const fleet = policy({
      maxAttempts: 3,
      budget: shared.admission("bench:policy"),
      breaker: shared.breaker("bench:policy", { consecutiveFailures: 5 }),
    });
    await shared.fleet.sync();
    const loop = (fn: () => Promise<unknown>) => async (n: number) => {
      for (let i = 0; i < n; i++) await fn();
    };
    const cases: Case[] = [
      { name: "bare call", run: loop(work) },
      { name: "policy, local admission + breaker", run: loop(() => local.execute(work)) },
      { name: "policy, shared admission + breaker", run: loop(() => fleet.execute(work)) },
    ];
    const results = await measure(cases, 20_000);
    report("success-path overhead per call, shared against local state", results, "bare call");
    const ns = (n: string) => results.find((r) => r.name === n)!.nsPerOp;
    const base = ns("bare call");
    const ratio =
      (ns("policy, shared admission + breaker") - base) /
      (ns("policy, local admission + breaker") - base);
    console.log(`  shared overhead / local overhead: ${ratio.toFixed(2)}`);
  } finally {
    shared.close();
    await client.close();
    await redis.stop();
  }
}
