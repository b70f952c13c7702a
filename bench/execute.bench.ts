import { ExponentialBackoff, handleAll, retry } from "cockatiel";
import pRetry from "p-retry";
import { otel } from "../src/otel/otel.ts";
import { policy } from "../src/policy/policy.ts";
import { type Case, measure, report } from "./harness.ts";

/** Success-path overhead of one call through each retry wrapper (issue 2's benchmark). */
export async function benchExecute(): Promise<void> {
  const work = async () => 42;
  const bw = policy({ maxAttempts: 3 });
  // The defaults without the rate limiter and its concurrency limit (rule 19): their cost.
  const bwNoLimiter = policy({ maxAttempts: 3, limiter: false });
  const bwFull = policy({
    maxAttempts: 3,
    attemptTimeoutMs: 30_000,
    deadlineMs: 60_000,
    budget: { maxTokens: 10 },
  });
  // Telemetry switched on, with no OpenTelemetry provider registered: the API's no-ops.
  const bwOtel = policy({ maxAttempts: 3, observe: otel() });
  // A rate limiter that never binds: what taking and settling a permit costs per call.
  const bwLimiter = policy({ maxAttempts: 3, limiter: {} });
  const bwLimits = policy({
    maxAttempts: 3,
    limiter: { limits: { requestsPerMinute: 1e12, tokensPerMinute: 1e15 }, maxConcurrent: 1e6 },
  });
  const cost = { cost: { inputTokens: 1200, outputTokens: 300 } };
  const cockatiel = retry(handleAll, { maxAttempts: 2, backoff: new ExponentialBackoff() });
  const loop = (fn: () => Promise<unknown>) => async (n: number) => {
    for (let i = 0; i < n; i++) await fn();
  };
  const cases: Case[] = [
    { name: "bare call", run: loop(work) },
    { name: "breakwater policy.execute", run: loop(() => bw.execute(work)) },
    { name: "breakwater, limiter: false", run: loop(() => bwNoLimiter.execute(work)) },
    { name: "breakwater (timeout+deadline+budget)", run: loop(() => bwFull.execute(work)) },
    { name: "breakwater + otel(), no provider", run: loop(() => bwOtel.execute(work)) },
    { name: "breakwater + limiter, nothing known", run: loop(() => bwLimiter.execute(work)) },
    {
      name: "breakwater, a cost given, no limiter",
      run: loop(() => bwNoLimiter.execute(work, cost)),
    },
    {
      name: "breakwater + limiter, RPM and TPM buckets",
      run: loop(() => bwLimits.execute(work, cost)),
    },
    { name: "cockatiel retry.execute", run: loop(() => cockatiel.execute(work)) },
    { name: "p-retry", run: loop(() => pRetry(work, { retries: 2 })) },
  ];
  const results = await measure(cases, 20_000);
  report("success-path overhead per call (median of 9 rounds x 20k calls)", results, "bare call");
  const ns = (n: string) => results.find((r) => r.name === n)!.nsPerOp;
  const base = ns("bare call");
  const cockatielNs = ns("cockatiel retry.execute") - base;
  const ratio = (ns("breakwater policy.execute") - base) / cockatielNs;
  const bare = (ns("breakwater, limiter: false") - base) / cockatielNs;
  console.log(`  breakwater overhead / cockatiel overhead: ${ratio.toFixed(2)}`);
  console.log(`  the same with limiter: false: ${bare.toFixed(2)} (target <= 1)`);
  const gate = ns("breakwater policy.execute") - ns("breakwater, limiter: false");
  console.log(`  the default limiter and concurrency limit per call: +${gate.toFixed(0)} ns`);
  const limiter =
    ns("breakwater + limiter, RPM and TPM buckets") - ns("breakwater, a cost given, no limiter");
  console.log(`  a rate limiter's permit per call: +${limiter.toFixed(0)} ns`);
}
