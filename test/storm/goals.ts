import { beforeAll, describe, expect, it } from "vitest";
import type { StackResult, TurnScore } from "../../src/storm/metrics.ts";
import { runStorm, type ScenarioReport } from "../../src/storm/storm.ts";

/**
 * The goals breakwater's defaults (the "breakwater" row: `policy()` and a deadline per
 * turn) are held to in every scenario against every single-upstream peer, breakwater+fallback
 * against every peer that falls back to the same second provider, and breakwater+engine
 * against the durable engines as teams write them, for one seed. Where a goal is missed,
 * the test holds the bound that is met instead, so a regression still fails it; the table
 * of goals in docs/storm.md says which, by how much and why.
 */
export const PEERS = [
  "naive",
  "openai-sdk",
  "ai-sdk",
  "langchain",
  "langchain-v1",
  "ai-retry",
  "openai-agents",
  "litellm-router",
];
const FALLBACK_PEERS = [
  "langchain-v1+fallback",
  "ai-retry+fallback",
  "ai-fallback+fallback",
  "litellm-router+fallback",
];
const ENGINE_PEERS = ["temporal+openai-sdk", "restate+ai-sdk"];
/** The "+fallback" peers that send each call to the primary first. */
const PRIMARY_FIRST = FALLBACK_PEERS.filter((p) => p !== "ai-fallback+fallback");
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
export const GROUPS = [
  { row: "breakwater", peers: PEERS },
  { row: "breakwater+fallback", peers: FALLBACK_PEERS },
  { row: "breakwater+engine", peers: ENGINE_PEERS },
] as const;
const TS = ["s20", "s30", "s60", "patience"] as const;

/**
 * Where whole turns fall short of the group's best peer by more than a point, the most
 * points short over seeds 1-5 (scenario/window/T; a row's name before it: that row's only),
 * held as the bound (docs/storm.md, "Whole turns: the goals": a trade-off of the capacity,
 * not a setting: the peers above there are the ones that dropped the turns the row kept, or
 * that kept their users waiting, so fewer turns were asked).
 */
const SHORT_BY: Record<string, number> = {
  "outage-503/trigger/s20": 6,
  "outage-503/trigger/patience": 3,
  "rate-limit/trigger/s60": 10,
  "rate-limit/trigger/patience": 4,
  "rate-limit/after/s20": 25,
  "rate-limit/after/s30": 17,
  "rate-limit/after/s60": 14,
  "fan-out/trigger/s60": 24,
  "fan-out/trigger/patience": 3,
  "fan-out/after/s20": 31,
  "fan-out/after/s30": 30,
  "fan-out/after/s60": 27,
  "metastable/after/s20": 5,
  "metastable/after/s30": 3,
  // ai-fallback moves every call to the second provider for minutes after one switch: a
  // degraded primary's long turns (about 70 s) go faster on an idle second one.
  // breakwater+fallback sends each call to the primary first, and moves it on when it fails.
  "breakwater+fallback:degradation/trigger/s60": 38,
  "breakwater+fallback:degradation/after/s60": 31,
};

const answered = (r: StackResult) => r.turns.trigger.within.patience;

/**
 * A group's row and peers in one scenario, and the yardstick of its per-call goals: every
 * peer of the group, unless the row answers more whole turns (first turns begun in the
 * trigger, within the patience) than every one of them by more than a point. Then the peers
 * that answer as many (within a point), of any group with no more upstreams; failing those,
 * the group's peer that answers the most. Per call, a stack that drops a turn looks faster and lighter than one
 * that finishes it (its failed turns end quickly, its users come back sooner with calls that
 * find room), so the per-call goals compare like with like (tool-deploy: the peers give up
 * on the payment, breakwater waits out the deploy, and its turns resume together after it).
 */
function view(s: ScenarioReport, names: readonly string[] = PEERS, rowName = "breakwater") {
  const get = (name: string) => s.results.find((r) => r.stack === name)!;
  const row = get(rowName);
  const peers = names.map(get);
  const ahead = answered(row) > Math.max(...peers.map(answered)) + 0.01;
  const alike = (list: readonly StackResult[]) =>
    list.filter((p) => answered(p) >= answered(row) - 0.01);
  // Of any group with no more upstreams than the row's (a second provider is more capacity).
  const two = names === FALLBACK_PEERS;
  const everyPeer = [...PEERS, ...ENGINE_PEERS, ...(two ? FALLBACK_PEERS : [])].map(get);
  const most = peers.filter((p) => answered(p) === Math.max(...peers.map(answered)));
  const yardstick = !ahead ? peers : alike(everyPeer).length > 0 ? alike(everyPeer) : most;
  const best = (f: (r: StackResult) => number) => Math.max(...yardstick.map(f));
  const lowest = (f: (r: StackResult) => number) => Math.min(...yardstick.map(f));
  return {
    bw: get("breakwater"),
    fb: get("breakwater+fallback"),
    row,
    ahead,
    get,
    bestSuccess: best((r) => r.successRate),
    bestGoodput: best((r) => r.goodputDuringTrigger),
    lowestRefused: lowest((r) => r.refusedAfterTrigger),
    fastestPeer: Math.min(...peers.map((r) => r.recoveryS ?? Number.POSITIVE_INFINITY)),
    fastest: (q: "p50" | "p99") => Math.min(...yardstick.map((r) => r.userWaitS[q])),
  };
}

/** The turn checks of one group in one scenario: the points short, where more than allowed. */
export function turnMisses(
  s: ScenarioReport,
  row: string,
  peers: readonly string[],
  shortBy: Record<string, number> = SHORT_BY,
): string[] {
  const get = (name: string) => s.results.find((r) => r.stack === name)!;
  const out: string[] = [];
  for (const w of ["trigger", "after"] as const) {
    const mine: TurnScore = get(row).turns[w];
    if (mine.begun < 30) continue; // too few turns to score (blip's 5 s trigger)
    for (const t of TS) {
      const best = Math.max(...peers.map((p) => get(p).turns[w].within[t]));
      const key = `${s.scenario.name}/${w}/${t}`;
      const allowed = (shortBy[`${row}:${key}`] ?? shortBy[key] ?? 1) / 100;
      const short = best - mine.within[t];
      if (short > allowed + 1e-9)
        out.push(`${s.scenario.name} ${row} ${w} ≤${t}: ${(short * 100).toFixed(1)} points short`);
    }
  }
  return out;
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

    it("whole turns: in every group, at 20, 30, 60 s and the patience, during the trigger and in the minute after, answered >= the best peer's minus 1 point (where short, no more than over seeds 1-5)", () => {
      const misses = SCENARIOS.flatMap((name) =>
        GROUPS.flatMap((g) => turnMisses(report.get(name)!, g.row, g.peers)),
      );
      expect(misses).toEqual([]);
    });

    it("whole turns: a payment tool through a deploy answers >= 97% of the turns begun in it, in every group, nobody charged twice", () => {
      for (const g of GROUPS) {
        const tool = view(report.get("tool-deploy")!, g.peers, g.row).row;
        expect(tool.turns.trigger.within.patience, g.row).toBeGreaterThanOrEqual(0.97);
        expect(tool.duplicateSideEffects, g.row).toBe(0);
      }
    });

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

    it("outage-503: about 2 requests per call during the trigger (k = 2, and the admission's floor of a retry a second); after it, no retries and the load of the users it answered", () => {
      const s = report.get("outage-503")!;
      const v = view(s);
      expect(v.bw.amplificationDuringTrigger).toBeLessThanOrEqual(2.05);
      // The minute after: one request a call (nothing left to retry); the load is the users
      // coming back for their next turn, a few more than the SDK's (it answered more turns),
      // nothing like the stacks that retry (LangChain 1.7-2.1x, naive 5-7x).
      const end = s.scenario.trigger.endS;
      const sum = (a: readonly number[]) => a.slice(end, end + 60).reduce((x, y) => x + y, 0);
      expect(sum(v.bw.series.requests) / sum(v.bw.series.calls)).toBeLessThanOrEqual(1.02);
      const sdk = v.get("openai-sdk").loadAfterTrigger;
      expect(v.bw.loadAfterTrigger).toBeLessThanOrEqual(Math.max(1.1, sdk + 0.05));
    });

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

    it("with a second provider, against every peer with one: success >= the best's minus 1 point, p50 wait <= 1.25x the best's + 1 s, p99 <= 1.5x the best's + 2 s (where it answers no more whole turns), refused after <= max(0.5%, the lowest's)", () =>
      each((_v, name) => {
        const f = view(report.get(name)!, FALLBACK_PEERS, "breakwater+fallback");
        expect(f.fb.successRate, name).toBeGreaterThanOrEqual(f.bestSuccess - 0.01);
        // Waits compare like with like: where the row answers more whole turns than every
        // peer, the turn checks above (answered within each T) are the wait's measure; and
        // against the peers that send each call to the primary first (ai-fallback sends all
        // to the second provider for minutes after a switch: in degradation the idle second
        // one is faster than the degraded primary; its bargain, not a fallback's).
        if (!f.ahead) {
          const first = view(report.get(name)!, PRIMARY_FIRST, "breakwater+fallback");
          expect(f.fb.userWaitS.p50, name).toBeLessThanOrEqual(1.25 * first.fastest("p50") + 1);
          expect(f.fb.userWaitS.p99, name).toBeLessThanOrEqual(1.5 * first.fastest("p99") + 2);
        }
        expect(f.fb.refusedAfterTrigger, name).toBeLessThanOrEqual(
          Math.max(0.005, f.lowestRefused),
        );
      }));

    it("inside a durable engine, against the engines as written: success >= the best's minus 1 point (outage-503: the defaults' own, within 0.5), goodput >= 0.97x, p50 <= 1.25x the best's + 1 s, refused after <= max(0.5%, the lowest's), recovery as the defaults', no double charge, and no more requests than the defaults outside an engine", () =>
      each((v, name) => {
        const e = view(report.get(name)!, ENGINE_PEERS, "breakwater+engine");
        const be = e.row;
        const floor = name === "outage-503" ? v.bw.successRate - 0.005 : e.bestSuccess - 0.01;
        expect(be.successRate, name).toBeGreaterThanOrEqual(floor);
        expect(be.goodputDuringTrigger, name).toBeGreaterThanOrEqual(0.97 * e.bestGoodput - 0.05);
        expect(be.userWaitS.p50, name).toBeLessThanOrEqual(1.25 * e.fastest("p50") + 1);
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
