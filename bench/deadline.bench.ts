import { throwIfNotOk } from "../src/http/http-error.ts";
import { policy } from "../src/policy/policy.ts";
import { startFaultServer } from "../src/testing/fault-server/server.ts";

/** Deadline precision on loopback (issue 4): a 40 ms deadline against headers delayed
 * 200 ms, 200 runs: how far past the deadline did the call return? Seed 003 saw 5 ms. */
export async function benchDeadline(): Promise<void> {
  const server = await startFaultServer({ script: { rules: [{ headersDelayMs: 200 }] } });
  const p = policy({ deadlineMs: 40, maxAttempts: 3 });
  const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
  const overshoot: number[] = [];
  try {
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await p
        .execute(({ signal }) =>
          fetch(`${server.url}/v1/chat/completions`, { method: "POST", body, signal }).then(
            throwIfNotOk,
          ),
        )
        .catch(() => {});
      overshoot.push(performance.now() - t0 - 40);
    }
  } finally {
    await server.close();
  }
  overshoot.sort((a, b) => a - b);
  const q = (p: number) =>
    overshoot[Math.min(overshoot.length - 1, Math.floor(p * overshoot.length))]!;
  console.log("\ndeadline precision on loopback: 40 ms deadline, headers delayed 200 ms, 200 runs");
  console.log(
    `  past the deadline: p50 ${q(0.5).toFixed(2)} ms, p99 ${q(0.99).toFixed(2)} ms, max ${q(1).toFixed(2)} ms (target p99 < 2 ms)`,
  );
}
