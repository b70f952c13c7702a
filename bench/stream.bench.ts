import { policy } from "../src/policy/policy.ts";
import { type Case, measure, perUnit, report } from "./harness.ts";

/** A raw async stream of `n` small chunks, like an SDK's. */
async function* raw(n: number) {
  for (let i = 0; i < n; i++) yield { i };
}

/** Per-chunk overhead of policy.stream over iterating the raw stream (issue 3). */
export async function benchStream(): Promise<void> {
  const N = 100_000;
  const plain = policy();
  const watched = policy({
    firstTokenTimeoutMs: 30_000,
    idleTimeoutMs: 15_000,
    deadlineMs: 600_000,
  });
  const usage = (c: { i: number }) => (c.i === N - 1 ? { outputTokens: N } : undefined);
  const drain = async (it: AsyncIterable<unknown>) => {
    for await (const _ of it);
  };
  // Each case streams N chunks once per op; ns/op / N = ns per chunk.
  const cases: Case[] = [
    {
      name: "raw stream",
      run: async (n) => {
        for (let k = 0; k < n; k++) await drain(raw(N));
      },
    },
    {
      name: "policy.stream",
      run: async (n) => {
        for (let k = 0; k < n; k++) await drain(plain.stream(() => raw(N)));
      },
    },
    {
      name: "policy.stream + timeouts + usage",
      run: async (n) => {
        for (let k = 0; k < n; k++) await drain(watched.stream(() => raw(N), { usage }));
      },
    },
  ];
  const results = perUnit(await measure(cases, 3, 11), N);
  report(`per-chunk cost, ${N} small chunks (median of 11 rounds)`, results, "raw stream");
}
