import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/index.ts";
import {
  aiRetry,
  langchainV1,
  litellmRouter,
  litellmRouterFallback,
  openaiAgents,
} from "../../src/storm/stacks.ts";
import { SimHttpError, type StormStack } from "../../src/storm/types.ts";
import { mulberry32 } from "../../src/testing/index.ts";

/** One logical call through `stack` whose primary answers each request with what `answer`
 * says (an error to throw, or undefined to succeed), in virtual time: when each request
 * reached which provider, and how the call ended. */
async function trace(
  stack: StormStack,
  answer: (n: number) => Error | undefined,
  options: {
    fallbackFails?: boolean;
    clock?: VirtualClock;
    client?: ReturnType<StormStack["create"]>;
  } = {},
) {
  const clock = options.clock ?? new VirtualClock();
  const sent: { at: number; to: "primary" | "fallback" }[] = [];
  const usage = { inputTokens: 1, outputTokens: 1 };
  let n = 0;
  const client =
    options.client ??
    stack.create({
      clock,
      random: () => 0.5,
      provider: {
        call: async () => {
          sent.push({ at: clock.now(), to: "primary" });
          await clock.sleep(10);
          const e = answer(++n);
          if (e) throw e;
          return usage;
        },
      },
      fallback: {
        call: async () => {
          sent.push({ at: clock.now(), to: "fallback" });
          await clock.sleep(10);
          if (options.fallbackFails) throw new SimHttpError(503, "injected");
          return usage;
        },
      },
      tool: { call: () => Promise.reject(new Error("no tool")) },
    });
  const turn = { id: 1, startedAt: 0, patienceMs: 1e9, state: new Map() };
  const start = clock.now();
  const outcome = client.model({ inputTokens: 1, outputTokens: 1 }, { turn }).then(
    () => ({ ok: true as const, at: clock.now() - start }),
    (error: unknown) => ({ ok: false as const, at: clock.now() - start, error }),
  );
  await clock.runAll();
  const gaps = sent.slice(1).map((s, i) => s.at - sent[i]!.at - 10);
  return { sent, gaps, outcome: await outcome };
}

const e503 = () => new SimHttpError(503, "injected");
const e429 = (s?: number) => new SimHttpError(429, "rate", s);

describe("LiteLLM's Router (1.80) as the storm runs it", () => {
  it("three attempts, waits 0.5 s, 0.5 s, 1 s plus U(0, 0.75 s), one after the last too, then the first error", async () => {
    let k = 0;
    const t = await trace(litellmRouter, () => Object.assign(e503(), { nth: ++k }));
    expect(t.sent).toHaveLength(3);
    // random() = 0.5: jitter 0.375 s.
    expect(t.gaps).toEqual([875, 875]);
    expect(t.outcome.ok).toBe(false);
    // The trailing wait: 3 × 10 ms of service, 875 + 875 + 1 375 ms of waiting.
    expect(t.outcome.at).toBe(30 + 875 + 875 + 1_375);
    expect((t.outcome as { error: { nth: number } }).error.nth).toBe(1);
  });

  it("a Retry-After within 60 s is every wait, read off the first error; a longer one is not", async () => {
    const short = await trace(litellmRouter, (n) => (n === 1 ? e429(2) : e503()));
    expect(short.gaps).toEqual([2_375, 2_375]);
    const long = await trace(litellmRouter, () => e429(120));
    expect(long.gaps).toEqual([875, 875]);
  });

  it("a deployment whose minute had 1 000 requests, all failed, cools down: calls fail at once, nothing sent", async () => {
    const clock = new VirtualClock();
    let sent = 0;
    const client = litellmRouter.create({
      clock,
      random: () => 0.5,
      provider: {
        call: async () => {
          sent++;
          await clock.sleep(10);
          throw e503();
        },
      },
      fallback: { call: () => Promise.reject(new Error("unused")) },
      tool: { call: () => Promise.reject(new Error("no tool")) },
    });
    const turn = { id: 1, startedAt: 0, patienceMs: 1e9, state: new Map() };
    const calls = Array.from({ length: 334 }, () =>
      client.model({ inputTokens: 1, outputTokens: 1 }, { turn }).catch((e: unknown) => e),
    );
    await clock.advance(5_000);
    expect(sent).toBe(1_002); // 334 × 3: the 1 000th failure cooled it
    const before = sent;
    const late = client
      .model({ inputTokens: 1, outputTokens: 1 }, { turn })
      .catch((e: unknown) => e);
    await clock.advance(1);
    expect(sent).toBe(before);
    expect(((await late) as Error).name).toBe("RouterRateLimitError");
    await clock.runAll();
    await Promise.all(calls);
  });

  it("with fallbacks, the fallback group gets its own retries after the primary's, and the caller the primary's first error", async () => {
    let k = 0;
    const t = await trace(litellmRouterFallback, () => Object.assign(e503(), { nth: ++k }), {
      fallbackFails: true,
    });
    expect(t.sent.map((s) => s.to)).toEqual([
      "primary",
      "primary",
      "primary",
      "fallback",
      "fallback",
      "fallback",
    ]);
    expect((t.outcome as { error: { nth: number } }).error.nth).toBe(1);
    const rescued = await trace(litellmRouterFallback, e503);
    expect(rescued.outcome.ok).toBe(true);
    expect(rescued.sent.map((s) => s.to)).toEqual(["primary", "primary", "primary", "fallback"]);
  });
});

describe("the other 2026 peers' rules the fault-server check does not reach", () => {
  it("openai-agents: the runner sleeps a 90 s Retry-After in full (the client under it uses its backoff past 60 s)", async () => {
    const t = await trace(openaiAgents, (n) => (n <= 3 ? e429(90) : undefined));
    expect(t.outcome.ok).toBe(true);
    expect(t.sent).toHaveLength(4);
    // The client: min(0.5 s·2^n, 8 s)·(1 − 0.25·0.5); then the runner waits the 90 s.
    expect(t.gaps).toEqual([437.5, 875, 90_000]);
  });

  it("openai-agents: at most 7 requests, 3 from the client in the first runner attempt, then one a runner attempt", async () => {
    const t = await trace(openaiAgents, e503);
    expect(t.sent).toHaveLength(7);
    // Runner waits: round(min(500·2^n, 5000)·(0.875 + 0.25·0.5)) = 500, 1000, 2000, 4000.
    expect(t.gaps.slice(2)).toEqual([500, 1_000, 2_000, 4_000]);
  });

  it("ai-retry: one retry after 2 s (delay × factor^1), or the Retry-After capped at 60 s", async () => {
    expect((await trace(aiRetry, e503)).gaps).toEqual([2_000]);
    expect((await trace(aiRetry, () => e429(3))).gaps).toEqual([3_000]);
    expect((await trace(aiRetry, () => e429(120))).gaps).toEqual([60_000]);
    expect((await trace(aiRetry, () => new SimHttpError(400, "injected"))).sent).toHaveLength(1);
  });

  it("langchain-v1: a 429 without a hint is retried (the AsyncCaller alone stops), a long hint waited in full, a 413 never", async () => {
    const bare = await trace(langchainV1, (n) => (n === 1 ? e429() : undefined));
    expect(bare.outcome.ok).toBe(true);
    expect(bare.gaps).toEqual([1_000]); // 1 s·(1 ± 0.25·(2·0.5 − 1))
    const long = await trace(langchainV1, (n) => (n === 1 ? e429(120) : undefined));
    expect(long.gaps).toEqual([120_000]);
    const big = await trace(langchainV1, () => new SimHttpError(413, "injected"));
    expect(big.sent).toHaveLength(1);
  });
});

/** The same seed through the same stack gives the same trace: the peers draw only from
 * the simulation's random source. */
it("the peers' stacks are deterministic for a seed", async () => {
  const once = async (stack: StormStack) => {
    const clock = new VirtualClock();
    const r = mulberry32(3);
    const t = await trace(stack, () => (r() < 0.7 ? e503() : undefined), { clock });
    return t.sent.map((s) => `${s.to}@${s.at}`).join(",");
  };
  for (const s of [aiRetry, langchainV1, openaiAgents, litellmRouter])
    expect(await once(s), s.name).toBe(await once(s));
});
