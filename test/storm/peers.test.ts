import { createOpenAI } from "@ai-sdk/openai";
import { generateText } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/index.ts";
import {
  AI_SDK,
  LANGCHAIN,
  OPENAI_NODE,
  type PeerLayer,
  runLayers,
} from "../../src/storm/peers/index.ts";
import { SimHttpError } from "../../src/storm/types.ts";
import { type FaultServer, mulberry32, startFaultServer } from "../../src/testing/index.ts";
import { onFaultServer } from "../helpers.ts";

/** Every request fails with a 503 with probability 1/2. */
const HALF = { seed: 11, rules: [{ route: "openai" as const, probability: 0.5, status: 503 }] };

/** The simulated peer against a provider that fails half its requests: requests per call
 * and success over many calls in virtual time. */
async function simulated(layer: PeerLayer, calls = 4_000) {
  const clock = new VirtualClock();
  const random = mulberry32(5);
  let requests = 0;
  const leaf = async () => {
    requests++;
    if (random() < 0.5) throw new SimHttpError(503, "injected");
    return "ok";
  };
  const runs = Array.from({ length: calls }, () =>
    runLayers([layer], { clock, random }, undefined, leaf).then(
      () => true,
      () => false,
    ),
  );
  await clock.runAll();
  const ok = (await Promise.all(runs)).filter(Boolean).length;
  return { perCall: requests / calls, success: ok / calls };
}

/** `n` logical calls made at once through a real client: requests per call, as the server
 * counted them, and the share answered. */
async function real(server: FaultServer, n: number, call: () => Promise<unknown>) {
  server.setScript(HALF);
  server.resetStats();
  const ok = await Promise.all(
    Array.from({ length: n }, () =>
      call().then(
        () => true,
        () => false,
      ),
    ),
  );
  return { perCall: server.stats().requests / n, success: ok.filter(Boolean).length / n };
}

/** Four standard errors of a mean over `n` draws with spread `sd`: a real sample this far
 * from the model means the model is wrong, not unlucky. */
const band = (sd: number, n: number) => (4 * sd) / Math.sqrt(n);

// The cases wait on the clients' real backoff (seconds, little CPU): side by side, each on
// a fault server of its own.
describe.concurrent("the peer stacks behave as the real clients do (fault server, p = 0.5 failures)", () => {
  it("openai-node: requests per call and success match the simulated openai-sdk stack", async () => {
    const n = 120;
    const r = await onFaultServer((server) => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "test" }); // its defaults
      return real(server, n, () =>
        client.chat.completions.create({
          model: "gpt-4o-mini",
          messages: [{ role: "user", content: "hi" }],
        }),
      );
    });
    const sim = await simulated(OPENAI_NODE);
    console.log("openai-node real", r, "simulated", sim);
    // Attempts are 1, 2 or 3 (sd ~0.83); success is Bernoulli(0.875) (sd ~0.33).
    expect(Math.abs(r.perCall - sim.perCall)).toBeLessThan(band(0.83, n));
    expect(Math.abs(r.success - sim.success)).toBeLessThan(band(0.33, n));
    expect(sim.perCall).toBeCloseTo(1.75, 1);
  }, 30_000);

  it("the AI SDK (generateText, @ai-sdk/openai): the same against the simulated ai-sdk stack", async () => {
    const n = 80;
    const r = await onFaultServer((server) => {
      const provider = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "test" });
      return real(server, n, () =>
        generateText({ model: provider.chat("gpt-4o-mini"), prompt: "hi" }),
      );
    });
    const sim = await simulated(AI_SDK);
    console.log("ai-sdk real", r, "simulated", sim);
    expect(Math.abs(r.perCall - sim.perCall)).toBeLessThan(band(0.83, n));
    expect(Math.abs(r.success - sim.success)).toBeLessThan(band(0.33, n));
  }, 30_000);
});

describe.concurrent("the langchain stack decides as @langchain/core 1.4.0's AsyncCaller does", () => {
  const fail = (message: string, fields: Record<string, unknown>) =>
    Object.assign(new Error(message), fields);
  const past = new Date(Date.now() - 60_000).toUTCString();
  const CASES: [string, Error][] = [
    ["413", fail("Request too large", { status: 413 })],
    [
      "429, 'try again in 2s'",
      fail("Rate limit reached. Please try again in 2s.", { status: 429 }),
    ],
    [
      "429, Retry-After a past date",
      fail("rate limited", { status: 429, headers: { "retry-after": past } }),
    ],
    [
      "429 naming a quota",
      fail("You exceeded your current quota, please check your plan", { status: 429 }),
    ],
    ["429 without a hint", fail("rate limited", { status: 429 })],
    [
      "429, Retry-After 120",
      fail("rate limited", { status: 429, headers: { "retry-after": "120" } }),
    ],
    ["503", fail("overloaded", { status: 503 })],
    ["408", fail("timeout", { status: 408 })],
    ["ECONNABORTED", fail("socket hang up", { code: "ECONNABORTED" })],
    ["insufficient_quota code", fail("quota", { status: 429, code: "insufficient_quota" })],
    ["an abort", Object.assign(new Error("aborted"), { name: "AbortError" })],
  ];

  it("retries exactly what the real one retries, and waits a message's hint", async () => {
    const { AsyncCaller } = await import("@langchain/core/utils/async_caller");
    const caller = new AsyncCaller({ maxRetries: 1 });
    const results = await Promise.all(
      CASES.map(async ([name, error]) => {
        let calls = 0;
        const started = Date.now();
        await caller
          .call(async () => {
            if (++calls === 1) throw error;
            return "ok";
          })
          .catch(() => undefined);
        const simulated = LANGCHAIN.next(error, 0, () => 0.5, Date.now());
        return {
          name,
          real: calls === 2,
          sim: simulated !== undefined,
          ms: Date.now() - started,
          simulated,
        };
      }),
    );
    for (const r of results) expect(r.sim, r.name).toBe(r.real);
    // The cases that differ from core 1.2.5 (what the storm modelled before):
    const by = new Map(results.map((r) => [r.name, r]));
    expect(by.get("413")!.real).toBe(false);
    expect(by.get("429, 'try again in 2s'")!.real).toBe(true);
    expect(by.get("429, Retry-After a past date")!.real).toBe(true);
    // A named wait: the real one slept at least 2 s, the model waits exactly that.
    expect(by.get("429, 'try again in 2s'")!.ms).toBeGreaterThanOrEqual(1_900);
    expect(by.get("429, 'try again in 2s'")!.simulated).toBe(2_000);
  }, 30_000);

  it("a ChatOpenAI call the caller aborts sends no request after the abort (cancels: true)", async () => {
    const { ChatOpenAI } = await import("@langchain/openai");
    const server = await startFaultServer({
      script: { rules: [{ route: "openai", status: 503 }] },
    });
    try {
      const model = new ChatOpenAI({
        model: "gpt-4o-mini",
        apiKey: "test",
        configuration: { baseURL: `${server.url}/v1` },
      });
      const controller = new AbortController();
      const call = model.invoke("hi", { signal: controller.signal }).catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 300)); // inside the first backoff (1-2 s)
      controller.abort();
      await call;
      await new Promise((r) => setTimeout(r, 2_500)); // past where the next attempt would go
      expect(server.stats().requests).toBe(1);
      expect(LANGCHAIN.cancels).toBe(true);
    } finally {
      await server.close();
    }
  }, 30_000);
});
