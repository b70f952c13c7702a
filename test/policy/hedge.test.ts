import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AdaptiveAdmission } from "../../src/core/admission.ts";
import { CircuitBreaker } from "../../src/core/breaker.ts";
import type { Admission } from "../../src/core/budget.ts";
import { VirtualClock } from "../../src/core/clock.ts";
import { ledgerOf } from "../../src/core/errors.ts";
import { Hedging } from "../../src/core/hedge.ts";
import type { Ledger } from "../../src/core/ledger.ts";
import { type Limiter, type Permit, RateLimiter } from "../../src/core/limiter.ts";
import { ConfigError } from "../../src/core/validate.ts";
import type { AttemptContext } from "../../src/policy/call.ts";
import type { PolicyOptions } from "../../src/policy/options.ts";
import { policy } from "../../src/policy/policy.ts";
import { drive, httpError } from "../helpers.ts";

/** An operation whose attempt n answers after `ms[n - 1]` (or throws what is there), and
 * that records each attempt's start and whether its signal was aborted, and when. */
function timed(clock: VirtualClock, plan: (number | Error)[]) {
  const seen: { attempt: number; at: number; abortedAt?: number }[] = [];
  const op = async (ctx: AttemptContext) => {
    const me: (typeof seen)[number] = { attempt: ctx.attempt, at: clock.now() };
    seen.push(me);
    ctx.signal.addEventListener("abort", () => {
      me.abortedAt = clock.now();
    });
    const step = plan[ctx.attempt - 1] ?? 10;
    if (step instanceof Error) {
      await clock.sleep(5);
      throw step;
    }
    await clock.sleep(step, ctx.signal);
    return `answer ${ctx.attempt}`;
  };
  return { seen, op };
}

const base = (clock: VirtualClock, more: PolicyOptions = {}) =>
  policy({ clock, random: () => 0.5, limiter: false, ...more });

/** Records a call's ledger when it succeeds. */
function ledgers(more: PolicyOptions = {}) {
  const all: Ledger[] = [];
  return { all, onSuccess: (e: { ledger: Ledger }) => all.push(e.ledger), ...more };
}

describe("hedged first tokens (rule 21), execute", () => {
  it("sends one hedge after afterMs; the first to answer wins, the other is cut and booked", async () => {
    const clock = new VirtualClock();
    const l = ledgers();
    const p = base(clock, { hedge: { afterMs: 100 }, onSuccess: l.onSuccess });
    const { seen, op } = timed(clock, [1_000, 50]);
    const r = await drive(clock, p.execute(op, { cost: { inputTokens: 700 } }));
    expect(r).toEqual({ ok: true, value: "answer 2" });
    expect(seen.map((s) => [s.attempt, s.at])).toEqual([
      [1, 0],
      [2, 100],
    ]);
    // The loser is cut the moment the winner answers (its socket closes on the next tick).
    await new Promise((r) => setImmediate(r));
    expect(seen[0]!.abortedAt).toBe(150);
    const [lost, won] = l.all[0]!.attempts;
    expect(lost).toMatchObject({ outcome: "failed", hedged: "lost", durationMs: 150 });
    expect(lost!.failure).toMatchObject({ kind: "cancelled", code: "hedge_lost" });
    expect(lost!.usage).toEqual({ inputTokens: 700, outputTokens: 0 });
    expect(won).toMatchObject({ outcome: "ok", hedged: "won", hedge: true, startedAt: 100 });
    expect(l.all[0]!.wasted).toEqual({ inputTokens: 700, outputTokens: 0 });
    expect(clock.pending).toBe(0);
  });

  it("the first attempt can still win: the hedge is cut instead", async () => {
    const clock = new VirtualClock();
    const l = ledgers();
    const p = base(clock, { hedge: { afterMs: 100 }, onSuccess: l.onSuccess });
    const { seen, op } = timed(clock, [120, 500]);
    expect(await drive(clock, p.execute(op))).toEqual({ ok: true, value: "answer 1" });
    await new Promise((r) => setImmediate(r));
    expect(seen[1]!.abortedAt).toBe(120);
    expect(l.all[0]!.attempts.map((a) => [a.attempt, a.outcome, a.hedged])).toEqual([
      [2, "failed", "lost"],
      [1, "ok", "won"],
    ]);
  });

  it("no hedge when the answer begins in time (a JSON answer's headers: answering())", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 } });
    let attempts = 0;
    const op = async (ctx: AttemptContext) => {
      attempts++;
      await clock.sleep(60);
      ctx.answering(); // the headers came; the body takes long
      await clock.sleep(900);
      return "whole";
    };
    expect(await drive(clock, p.execute(op))).toEqual({ ok: true, value: "whole" });
    expect(attempts).toBe(1);
  });

  it("a first attempt that fails before the hedge delay retries as always, no hedge", async () => {
    const clock = new VirtualClock();
    const l = ledgers();
    const p = base(clock, { hedge: { afterMs: 100 }, onSuccess: l.onSuccess });
    const { seen, op } = timed(clock, [httpError(503), 20]);
    expect(await drive(clock, p.execute(op))).toEqual({ ok: true, value: "answer 2" });
    expect(seen).toHaveLength(2);
    expect(l.all[0]!.attempts.every((a) => a.hedged === undefined && !a.hedge)).toBe(true);
  });

  it("an attempt that fails while the other is in flight is booked; the other's answer counts", async () => {
    const clock = new VirtualClock();
    const l = ledgers();
    const p = base(clock, { hedge: { afterMs: 100 }, onSuccess: l.onSuccess });
    // Attempt 1 stalls, then fails at 300; the hedge (sent at 100) answers at 400.
    const op = async (ctx: AttemptContext) => {
      if (ctx.attempt === 1) {
        await clock.sleep(300);
        throw httpError(502);
      }
      await clock.sleep(300, ctx.signal);
      return "hedge";
    };
    expect(await drive(clock, p.execute(op))).toEqual({ ok: true, value: "hedge" });
    expect(l.all[0]!.attempts.map((a) => [a.attempt, a.outcome, a.failure?.status])).toEqual([
      [1, "failed", 502],
      [2, "ok", undefined],
    ]);
  });

  it("both failing: the call decides on the last failure, as for any attempt", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 }, maxAttempts: 2 });
    const op = async (ctx: AttemptContext) => {
      await clock.sleep(ctx.attempt === 1 ? 300 : 250);
      throw httpError(ctx.attempt === 1 ? 500 : 503);
    };
    const r = await drive(clock, p.execute(op));
    expect(r.ok).toBe(false);
    const ledger = ledgerOf(!r.ok && r.error)!;
    expect(ledger.attempts.map((a) => a.failure?.status)).toEqual([500, 503]);
  });

  it("never hedges a call marked hedge: false or effect: 'unsafe'", async () => {
    for (const options of [{ hedge: false as const }, { effect: "unsafe" as const }]) {
      const clock = new VirtualClock();
      const p = base(clock, { hedge: { afterMs: 100 } });
      const { seen, op } = timed(clock, [1_000]);
      expect(await drive(clock, p.execute(op, options))).toEqual({ ok: true, value: "answer 1" });
      expect(seen).toHaveLength(1);
    }
  });

  it("stands down while the breaker is not closed or the admission refuses", async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 2, openMs: 1_000 });
    const p = base(clock, { hedge: { afterMs: 100 }, breaker, budget: false });
    const fail = async () => {
      throw httpError(500);
    };
    for (let i = 0; i < 2; i++) await drive(clock, p.execute(fail, { maxAttempts: 1 }));
    expect(breaker.state).toBe("open");
    await clock.advance(60_000); // half-open: probes go, hedges do not
    expect(breaker.state).not.toBe("closed");
    const { seen, op } = timed(clock, [1_000]);
    await drive(clock, p.execute(op));
    expect(seen).toHaveLength(1);

    const clock2 = new VirtualClock();
    const admission = new AdaptiveAdmission({ clock: clock2, random: () => 0.99 });
    const q = base(clock2, { hedge: { afterMs: 100 }, budget: admission });
    for (let i = 0; i < 30; i++) admission.onFailure({ kind: "overloaded", retryable: true }, 0);
    expect(admission.rejectProbability).toBeGreaterThan(0);
    const t = timed(clock2, [1_000]);
    await drive(clock2, q.execute(t.op));
    expect(t.seen).toHaveLength(1);
  });

  it("a user's own limiter and admission stand it down by what they declare: calm, rejectProbability", async () => {
    // Neither is a breakwater class: each is written against its interface alone.
    const permit: Permit = { settle() {}, cancel() {} };
    const limiter: Limiter & { calm: boolean } = {
      calm: true,
      tryAcquire: () => permit,
      acquire: async () => permit,
      observeHeaders() {},
      hold() {},
      headroom: () => 1,
    };
    const admission: Admission & { rejectProbability: number } = {
      rejectProbability: 0,
      tryAcquire: () => true,
      onSuccess() {},
    };
    const clock = new VirtualClock();
    const p = base(clock, {
      hedge: { afterMs: 100, maxExtraRatio: 1 },
      limiter,
      budget: admission,
    });
    const hedges = async () => {
      const t = timed(clock, [500, 10]);
      await drive(clock, p.execute(t.op));
      return t.seen.length - 1;
    };
    expect(await hedges()).toBe(1); // both calm: the hedge goes
    limiter.calm = false;
    expect(await hedges()).toBe(0);
    limiter.calm = true;
    admission.rejectProbability = 0.2;
    expect(await hedges()).toBe(0);
    admission.rejectProbability = 0;
    expect(await hedges()).toBe(1);
  });

  it("goes through onRetry (told hedge: true), whose veto keeps it unsent", async () => {
    const clock = new VirtualClock();
    const events: unknown[] = [];
    const p = base(clock, {
      hedge: { afterMs: 100 },
      onRetry: (e) => {
        events.push({ attempt: e.attempt, hedge: e.hedge, error: e.error });
        return false;
      },
    });
    const { seen, op } = timed(clock, [1_000]);
    expect(await drive(clock, p.execute(op))).toEqual({ ok: true, value: "answer 1" });
    expect(seen).toHaveLength(1);
    expect(events).toEqual([{ attempt: 1, hedge: true, error: undefined }]);
  });

  it("draws on the hedge budget: at most maxExtraRatio of the calls, after the one to start", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100, maxExtraRatio: 0.25 } });
    let sent = 0;
    const op = async (ctx: AttemptContext) => {
      sent++;
      await clock.sleep(ctx.attempt === 1 ? 1_000 : 10, ctx.signal);
      return "ok";
    };
    await drive(clock, Promise.all(Array.from({ length: 20 }, () => p.execute(op))));
    // One to start, then a quarter of a hedge per call: 1 + 20 × 0.25.
    expect(sent - 20).toBe(6);
  });

  it("learns the delay: the p95 of recent first-content times, once minSamples are in", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { minSamples: 20 } });
    let sent = 0;
    const op = async (ctx: AttemptContext) => {
      sent++;
      await clock.sleep(ctx.attempt === 1 ? 40 + (sent % 20) * 5 : 10, ctx.signal);
      return "ok";
    };
    for (let i = 0; i < 20; i++) await drive(clock, p.execute(op));
    expect(sent).toBe(20); // no delay known yet: no hedge
    const slow = timed(clock, [5_000, 10]);
    await drive(clock, p.execute(slow.op));
    // 20 samples of 40..135 ms: the 95th percentile (nearest rank, the 19th) is 130 ms.
    expect(slow.seen.map((s) => s.at - slow.seen[0]!.at)).toEqual([0, 130]);
  });

  it("validates its options, naming the one that is wrong", async () => {
    expect(() => policy({ hedge: { afterMs: -1 } })).toThrow(ConfigError);
    expect(() => policy({ hedge: { afterMs: -1 } })).toThrow(/hedge\.afterMs/);
    expect(() => policy({ hedge: { percentile: 2 } })).toThrow(/hedge\.percentile/);
    expect(() => policy({ hedge: { after: 100 } as never })).toThrow(/after/);
    expect(() => policy({ hedge: 5 as never })).toThrow(/hedge.*true, false, or hedge options/);
    await expect(policy().execute(async () => 1, { hedge: true as never })).rejects.toThrow(
      /hedge/,
    );
  });

  it("property: whatever the latencies, one answer, and every attempt cut or finished", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 2, maxLength: 2 }),
        fc.integer({ min: 1, max: 300 }),
        async (ms, afterMs) => {
          const clock = new VirtualClock();
          const p = base(clock, { hedge: { afterMs }, limiter: {} });
          const { seen, op } = timed(clock, ms);
          const r = await drive(clock, p.execute(op));
          expect(r.ok).toBe(true);
          const hedgedAt = seen[1]?.at;
          expect(hedgedAt === undefined).toBe(ms[0]! <= afterMs);
          if (hedgedAt !== undefined) {
            const firstWins = ms[0]! <= afterMs + ms[1]!;
            expect((r as { value: string }).value).toBe(firstWins ? "answer 1" : "answer 2");
          }
          await new Promise((r) => setImmediate(r)); // the loser's abort reaches it
          expect(clock.pending).toBe(0); // no timer left behind
          expect(p.options.limiter!.headroom()).toBe(1);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("Hedging (core)", () => {
  it("reads the percentile of the last 256 first-content times", () => {
    const h = new Hedging({ minSamples: 10, percentile: 0.9 });
    for (let i = 1; i <= 9; i++) h.learn(i);
    expect(h.delayMs).toBeUndefined();
    h.learn(10);
    expect(h.delayMs).toBe(9); // the nearest rank: 9 of the 10 are within it
    for (let i = 0; i < 512; i++) h.learn(1_000);
    expect(h.delayMs).toBe(1_000);
  });
});

/** A stream whose attempt n yields `plan[n - 1]`: [ms to wait, chunk] steps; it records
 * each attempt's start and when its source was closed. */
function streaming(clock: VirtualClock, plan: [number, string][][]) {
  const seen: { attempt: number; at: number; closedAt?: number }[] = [];
  const open = (ctx: AttemptContext) => {
    const me: (typeof seen)[number] = { attempt: ctx.attempt, at: clock.now() };
    seen.push(me);
    const steps = plan[ctx.attempt - 1] ?? [];
    return (async function* () {
      try {
        for (const [ms, chunk] of steps) {
          await clock.sleep(ms, ctx.signal);
          yield chunk;
        }
      } finally {
        me.closedAt = clock.now();
      }
    })();
  };
  return { seen, open };
}

async function readAll(clock: VirtualClock, s: AsyncIterable<string>) {
  const out: string[] = [];
  const r = await drive(
    clock,
    (async () => {
      for await (const c of s) out.push(c);
    })(),
  );
  return { out, r };
}

describe("hedged first tokens (rule 21), streams", () => {
  const options = {
    isContent: (c: string) => !c.startsWith("meta"),
    usage: (c: string) => (c.startsWith("meta") ? { inputTokens: Number(c.slice(5)) } : undefined),
  };

  it("the hedge's content comes first: only its chunks reach the consumer, the stalled one is closed", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 } });
    const { seen, open } = streaming(clock, [
      [
        [10, "meta:900"],
        [1_000, "slow-1"],
        [10, "slow-2"],
      ],
      [
        [20, "meta:900"],
        [10, "fast-1"],
        [10, "fast-2"],
      ],
    ]);
    const s = p.stream(open, options);
    const { out, r } = await readAll(clock, s);
    expect(r.ok).toBe(true);
    expect(out).toEqual(["meta:900", "fast-1", "fast-2"]);
    await new Promise((resolve) => setImmediate(resolve));
    // Cut when the hedge's first content came (100 + 30).
    expect(seen[0]!.closedAt).toBe(130);
    const { ledger } = await s.done;
    expect(ledger.attempts.map((a) => [a.attempt, a.outcome, a.hedged])).toEqual([
      [1, "failed", "lost"],
      [2, "ok", "won"],
    ]);
    // The loser's prompt, as its own first chunk told it, is wasted.
    expect(ledger.wasted).toEqual({ inputTokens: 900, outputTokens: 0 });
  });

  it("the first attempt's content comes first: the hedge is closed, never shown", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 } });
    const { seen, open } = streaming(clock, [
      [
        [150, "one-1"],
        [10, "one-2"],
      ],
      [[500, "two-1"]],
    ]);
    const { out } = await readAll(clock, p.stream(open, options));
    expect(out).toEqual(["one-1", "one-2"]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen.map((a) => [a.at, a.closedAt])).toEqual([
      [0, 160],
      [100, 150],
    ]);
  });

  it("no hedge once content flows, however slow the rest (the winner's first content is the point of no return)", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 } });
    const { seen, open } = streaming(clock, [
      [
        [50, "a"],
        [5_000, "b"],
      ],
    ]);
    const { out } = await readAll(clock, p.stream(open, options));
    expect(out).toEqual(["a", "b"]);
    expect(seen).toHaveLength(1);
  });

  it("a head that fails while the other is in flight: the other goes on", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 } });
    let n = 0;
    const open = (ctx: AttemptContext) =>
      (async function* () {
        n++;
        if (ctx.attempt === 1) {
          await clock.sleep(200);
          throw httpError(502);
        }
        await clock.sleep(300, ctx.signal);
        yield "late but fine";
      })();
    const s = p.stream(open, options);
    const { out } = await readAll(clock, s);
    expect(out).toEqual(["late but fine"]);
    expect(n).toBe(2);
    expect((await s.done).ledger.attempts.map((a) => [a.outcome, a.failure?.status])).toEqual([
      ["failed", 502],
      ["ok", undefined],
    ]);
  });
});

describe("hedged first tokens (rule 21): every way out releases what it held", () => {
  it("a closed breaker lets the hedge through (the breaker is asked at once, not queued)", async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 5 });
    const p = base(clock, { hedge: { afterMs: 100 }, breaker });
    const { seen, op } = timed(clock, [1_000, 10]);
    expect(await drive(clock, p.execute(op))).toEqual({ ok: true, value: "answer 2" });
    expect(seen).toHaveLength(2);
    expect(breaker.state).toBe("closed");
  });

  it("a consumer that leaves a stream during the race: both attempts cut, both sources closed, no slot held", async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ clock, maxConcurrent: 10 });
    const p = base(clock, { hedge: { afterMs: 100 }, limiter });
    const { seen, open } = streaming(clock, [[[1_000, "one"]], [[1_000, "two"]]]);
    const s = p.stream(open);
    const first = s.next();
    await clock.advance(150); // the hedge went at 100
    expect(seen).toHaveLength(2);
    await s.return();
    await drive(
      clock,
      first.catch(() => undefined),
    );
    await new Promise((r) => setImmediate(r));
    expect(seen.map((a) => a.closedAt)).toEqual([150, 150]);
    expect(limiter.inFlight).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it("heads that show content in the same tick: the loser's source is closed too", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 } });
    const { seen, open } = streaming(clock, [[[200, "one"]], [[100, "two"]]]);
    const { out } = await readAll(clock, p.stream(open));
    expect(out).toHaveLength(1);
    await new Promise((r) => setImmediate(r));
    expect(seen.every((a) => a.closedAt === 200)).toBe(true);
  });

  it("a vetoed hedge gives its budget back: the next slow call hedges", async () => {
    const clock = new VirtualClock();
    let vetoes = 1;
    const p = base(clock, {
      hedge: { afterMs: 100, maxExtraRatio: 0.001 },
      onRetry: () => (vetoes-- > 0 ? false : undefined),
    });
    const one = timed(clock, [500]);
    await drive(clock, p.execute(one.op));
    expect(one.seen).toHaveLength(1); // vetoed
    const two = timed(clock, [500, 10]);
    expect(await drive(clock, p.execute(two.op))).toEqual({ ok: true, value: "answer 2" });
  });

  it("a hedge is an attempt: none when the call has no attempt left (maxAttempts)", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100 } });
    const { seen, op } = timed(clock, [500, 10]);
    await drive(clock, p.execute(op, { maxAttempts: 1 }));
    expect(seen).toHaveLength(1);
  });
});

describe("hedged first tokens (rule 21): the upstream's own overload stands hedges down", () => {
  it("after a 503, 529 or 429, no hedge for 30 s; then they go again", async () => {
    const clock = new VirtualClock();
    const p = base(clock, { hedge: { afterMs: 100, maxExtraRatio: 1 }, budget: false });
    await drive(clock, p.execute(timed(clock, [httpError(529), 10]).op));
    const during = timed(clock, [500, 10]);
    await drive(clock, p.execute(during.op));
    expect(during.seen).toHaveLength(1);
    await clock.advance(30_000);
    const after = timed(clock, [500, 10]);
    expect(await drive(clock, p.execute(after.op))).toEqual({ ok: true, value: "answer 2" });
  });
});
