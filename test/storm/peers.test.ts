import { createOpenAI } from "@ai-sdk/openai";
import { generateText } from "ai";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/index.ts";
import { AI_SDK, OPENAI_NODE, type PeerLayer, runLayers } from "../../src/storm/peers.ts";
import { SimHttpError } from "../../src/storm/types.ts";
import { type FaultServer, mulberry32, startFaultServer } from "../../src/testing/index.ts";

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

describe("the peer stacks behave as the real clients do (fault server, p = 0.5 failures)", () => {
  let server: FaultServer;
  beforeAll(async () => {
    server = await startFaultServer();
  });
  afterAll(() => server.close());

  it("openai-node: requests per call and success match the simulated openai-sdk stack", async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "test" }); // its defaults
    const n = 120;
    const r = await real(server, n, () =>
      client.chat.completions.create({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
      }),
    );
    const sim = await simulated(OPENAI_NODE);
    console.log("openai-node real", r, "simulated", sim);
    // Attempts are 1, 2 or 3 (sd ~0.83); success is Bernoulli(0.875) (sd ~0.33).
    expect(Math.abs(r.perCall - sim.perCall)).toBeLessThan(band(0.83, n));
    expect(Math.abs(r.success - sim.success)).toBeLessThan(band(0.33, n));
    expect(sim.perCall).toBeCloseTo(1.75, 1);
  }, 30_000);

  it("the AI SDK (generateText, @ai-sdk/openai): the same against the simulated ai-sdk stack", async () => {
    const provider = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "test" });
    const n = 80;
    const r = await real(server, n, () =>
      generateText({ model: provider.chat("gpt-4o-mini"), prompt: "hi" }),
    );
    const sim = await simulated(AI_SDK);
    console.log("ai-sdk real", r, "simulated", sim);
    expect(Math.abs(r.perCall - sim.perCall)).toBeLessThan(band(0.83, n));
    expect(Math.abs(r.success - sim.success)).toBeLessThan(band(0.33, n));
  }, 30_000);
});
