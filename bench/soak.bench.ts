import { getEventListeners } from "node:events";
import { CircuitBreaker, policy } from "../src/index.ts";

/**
 * A soak: 100k calls and 10k streams on one long-lived signal, with failures, retries,
 * timeouts, hostile errors, consumers who stop, abandon or never read. What must hold after:
 * no listener on the signal, no pending timer, the heap flat (issue 11's figures).
 */
const gc = (globalThis as { gc?: () => void }).gc;
const turn = () => new Promise((r) => setImmediate(r));
const settle = async () => {
  for (let i = 0; i < 20; i++) {
    gc?.();
    await new Promise((r) => setTimeout(r, 10));
  }
};
const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

function op(i: number) {
  let n = 0;
  return ({ signal }: { signal: AbortSignal }) => {
    n++;
    const k = i % 20;
    if (k === 0 && n === 1) return Promise.reject(Object.assign(new Error("503"), { status: 503 }));
    if (k === 1) return Promise.reject(Object.assign(new Error("400"), { status: 400 }));
    if (k === 2 && n === 1)
      return new Promise((_, reject) =>
        signal.addEventListener("abort", () => reject(signal.reason)),
      );
    if (k === 3) {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return Promise.reject(proxy);
    }
    return Promise.resolve(i);
  };
}

async function* chunks(n: number, failAt = -1) {
  for (let i = 0; i < n; i++) {
    if (i === failAt) throw Object.assign(new Error("cut"), { code: "ECONNRESET" });
    yield { text: `t${i}` };
    await turn();
  }
}

async function oneStream(p: ReturnType<typeof policy>, signal: AbortSignal, i: number) {
  const k = i % 10;
  const s = p.stream(() => chunks(6, k === 7 ? 3 : -1), { signal });
  if (k === 9) return; // never read
  let read = 0;
  try {
    for await (const _ of s) {
      if (++read === 2 && k >= 3 && k <= 4) break; // stops: return()
      if (read === 2 && k >= 5 && k <= 6) return; // abandons: no return()
    }
  } catch {
    // an interrupted stream: its error is the expected outcome
  }
}

export async function benchSoak(): Promise<void> {
  const long = new AbortController().signal;
  const breaker = new CircuitBreaker({ consecutiveFailures: 1_000_000 });
  const p = policy({
    backoff: { baseMs: 0, capMs: 1 },
    attemptTimeoutMs: 5,
    idleTimeoutMs: 50,
    breaker,
  });
  const warm = async (calls: number, streams: number) => {
    const batch: Promise<unknown>[] = [];
    for (let i = 0; i < calls; i++) {
      batch.push(p.execute(op(i), { signal: long }).catch(() => {}));
      if (batch.length === 500) await Promise.all(batch.splice(0));
    }
    await Promise.all(batch);
    for (let i = 0; i < streams; i += 100)
      await Promise.all(Array.from({ length: 100 }, (_, j) => oneStream(p, long, i + j)));
  };
  await warm(2_000, 200);
  await settle();
  const before = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  await warm(100_000, 10_000);
  const ms = performance.now() - t0;
  await settle();
  const after = process.memoryUsage().heapUsed;
  console.log("\nsoak: 100k calls and 10k streams on one long-lived signal");
  console.log(`  wall time                        ${(ms / 1000).toFixed(1)} s`);
  console.log(`  heap growth after GC             ${mb(after - before)} (from ${mb(before)})`);
  console.log(`  listeners left on the signal     ${getEventListeners(long, "abort").length}`);
  console.log(`  timers left                      ${timers()}`);
  console.log(
    `  breaker                          ${breaker.state}, probe slots free: ${breaker.tryAcquire()}`,
  );
  if (!gc) console.log("  (run with --expose-gc for a meaningful heap figure)");
}
