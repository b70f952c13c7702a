import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AdaptiveConcurrency, isOverload } from "../../src/core/concurrency.ts";
import type { Failure } from "../../src/core/failure.ts";

const OVERLOADED: Failure = { kind: "overloaded", retryable: true, status: 503 };
const TIMED_OUT: Failure = { kind: "timeout", retryable: true, code: "attempt_timeout" };
const RATE_LIMITED: Failure = { kind: "rate_limited", retryable: true, status: 429 };

/** What an attempt saw as it was sent. */
const sent = (inFlightAtSend: number, limitAtSend: number, heldAtSend = false) => ({
  inFlightAtSend,
  limitAtSend,
  heldAtSend,
});

/** `n` answers while the limit binds: each of an attempt sent at `at` with as many in
 * flight as the limit allows. */
function binding(c: AdaptiveConcurrency, n: number, at: number) {
  for (let i = 0; i < n; i++) {
    const l = Math.floor(c.limit);
    c.ended({ startedAt: at }, sent(l, l), l, at + 1);
  }
}

/** `n` attempts sent at `at` with `inFlight` in flight, each cut by our timer 6 s later. */
function timeouts(c: AdaptiveConcurrency, n: number, inFlight: number, at: number) {
  for (let i = 0; i < n; i++)
    c.ended({ startedAt: at, failure: TIMED_OUT }, sent(inFlight, c.limit), inFlight, at + 6_000);
}

/** `n` answers, each of an attempt sent at `at` with `inFlight` in flight. */
function answer(c: AdaptiveConcurrency, n: number, inFlight: number, at: number, now = at + 1) {
  for (let i = 0; i < n; i++) c.ended({ startedAt: at }, sent(inFlight, c.limit), inFlight, now);
}

describe("AdaptiveConcurrency (rule 19)", () => {
  it("armed, overload answers no more frequent at the limit than below it do not take it down round trip after round trip", () => {
    // Below the limit, 3 in 10 attempts fail with a 503 whatever is sent (an incident's
    // share); then a cut arms it, and demand keeps it at the limit with the same share.
    const c = new AdaptiveConcurrency();
    let t = 0;
    for (let i = 0; i < 200; i++) {
      const f = i % 10 < 3 ? OVERLOADED : undefined;
      c.ended({ startedAt: t, ...(f && { failure: f }) }, sent(10, 40), 10, t + 1);
      t += 10;
    }
    c.ended({ startedAt: t, failure: OVERLOADED }, sent(40, 40, true), 40, t + 1); // held demand
    const armed = c.limit;
    expect(armed).toBeLessThan(20);
    for (let round = 0; round < 20; round++) {
      t += 2_000;
      const l = Math.floor(c.limit);
      for (let i = 0; i < l; i++) {
        const f = i % 10 < 3 ? OVERLOADED : undefined;
        c.ended({ startedAt: t, ...(f && { failure: f }) }, sent(l, l), l, t + 1_000);
      }
    }
    expect(c.limit).toBeGreaterThanOrEqual(armed);
    // The same, with overloads that come only at the limit, is cut as before.
    const d = new AdaptiveConcurrency();
    d.ended({ startedAt: 0, failure: OVERLOADED }, sent(40, 40, true), 40, 1);
    for (let round = 0; round < 5; round++) {
      t += 2_000;
      const l = Math.floor(d.limit);
      for (let i = 0; i < l; i++) {
        const f = i % 10 < 3 ? OVERLOADED : undefined;
        d.ended({ startedAt: t, ...(f && { failure: f }) }, sent(l, l), l, t + 1_000);
      }
    }
    expect(d.limit).toBeLessThan(0.5 * 28); // cut again and again from 28
  });

  it("is unarmed until trouble: no cap before any answer, then only pace, twice what was in flight as answers came", () => {
    const c = new AdaptiveConcurrency();
    expect(c.limit).toBe(Number.POSITIVE_INFINITY);
    expect(c.calm).toBe(true);
    answer(c, 20, 40, 0);
    expect(c.limit).toBe(80);
    answer(c, 5, 60, 10);
    expect(c.limit).toBe(120);
    expect(c.calm).toBe(true);
  });

  it("which signals are overloads: 503/529 overloads and our own timer's cuts, not a 429 or a caller's abort", () => {
    expect(isOverload(OVERLOADED)).toBe(true);
    expect(isOverload(TIMED_OUT)).toBe(true);
    expect(isOverload({ kind: "timeout", retryable: true, code: "first-token_timeout" })).toBe(
      true,
    );
    expect(isOverload(RATE_LIMITED)).toBe(false);
    expect(isOverload({ kind: "cancelled", retryable: false })).toBe(false);
    expect(isOverload({ kind: "timeout", retryable: true })).toBe(false); // an SDK's own
    expect(isOverload(undefined)).toBe(false);
  });

  it("an overload met well below the limit says nothing of our load: unarmed, a fast 503 never arms it", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    for (let t = 1; t < 50; t++)
      c.ended({ startedAt: t, failure: OVERLOADED }, sent(100, 200), 100, t + 1);
    expect(c.limit).toBe(200); // still only pace
  });

  it("an overload met while releasing held demand arms it at 0.7 of what was in flight at send", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    c.ended({ startedAt: 5, failure: OVERLOADED }, sent(150, 200, true), 150, 6);
    expect(c.limit).toBe(105);
  });

  it("most recent attempts cut by our timer arm it even unarmed and unheld: they waited their whole window in the queue", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    // 13 timeouts in a row are not yet most of the last ~20 outcomes; the 14th is.
    timeouts(c, 13, 120, 5);
    expect(c.limit).toBe(200);
    timeouts(c, 1, 120, 5);
    expect(c.limit).toBe(84);
    // A 429 is the rate limiter's: never a cut.
    const d = new AdaptiveConcurrency();
    answer(d, 20, 100, 0);
    d.ended({ startedAt: 5, failure: RATE_LIMITED }, sent(190, 200, true), 190, 6);
    expect(d.limit).toBe(200);
  });

  it("one long answer our timer cut, among answers, says nothing of the upstream's queue", () => {
    const c = new AdaptiveConcurrency();
    for (let i = 0; i < 200; i++) {
      answer(c, 4, 100, i * 10);
      c.ended({ startedAt: i * 10, failure: TIMED_OUT }, sent(100, c.limit), 100, i * 10 + 6_000);
    }
    expect(c.limit).toBe(200); // a fifth of outcomes timed out: never armed
  });

  it("at most one cut per round trip: only an attempt sent after the last cut, once one was answered, cuts again", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    c.ended({ startedAt: 5, failure: OVERLOADED }, sent(100, 200, true), 100, 100);
    expect(c.limit).toBe(70);
    // Sent before the cut: the same episode's news.
    c.ended({ startedAt: 50, failure: OVERLOADED }, sent(70, 70), 70, 101);
    expect(c.limit).toBe(70);
    // Sent after the cut, but nothing sent after it was answered yet.
    c.ended({ startedAt: 150, failure: OVERLOADED }, sent(70, 70), 70, 151);
    expect(c.limit).toBe(70);
    c.ended({ startedAt: 160 }, sent(70, 70), 70, 170);
    c.ended({ startedAt: 165, failure: OVERLOADED }, sent(70, 70), 70, 171);
    expect(c.limit).toBe(49);
  });

  it("after a queueing episode (timeouts), answers double it back to what was answered before; then growth slows to its square root", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    timeouts(c, 14, 40, 5);
    expect(c.limit).toBe(28);
    // Answers while it binds: one more each, up to the 100 answered before.
    binding(c, 72, 200);
    expect(c.limit).toBe(100);
    binding(c, 10, 300);
    expect(c.limit).toBeGreaterThan(100);
    expect(c.limit).toBeLessThan(102); // ~ +1/sqrt(l) an answer
  });

  it("an overload while the queue still holds most attempts (timeouts) keeps that target", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    timeouts(c, 14, 40, 5);
    expect(c.limit).toBe(28);
    c.ended({ startedAt: 6_100 }, sent(28, 28), 28, 6_200);
    timeouts(c, 1, 28, 6_150);
    expect(c.limit).toBe(19);
    binding(c, 81, 20_000);
    expect(c.limit).toBe(100);
  });

  it("after held demand overloaded it, growth above the cut level is slow from the start (that level was not safe)", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    c.ended({ startedAt: 5, failure: OVERLOADED }, sent(40, 200, true), 40, 100);
    expect(c.limit).toBe(28);
    binding(c, 10, 200);
    expect(c.limit).toBeLessThan(31);
  });

  it("overloaded again once it answers again, below or at that target, it drops the target: a smaller upstream is not probed forever", () => {
    for (const at of [60, 100]) {
      const c = new AdaptiveConcurrency();
      answer(c, 20, 100, 0);
      timeouts(c, 14, 40, 5); // the cut is at 6 005 ms
      binding(c, at - 28, 7_000);
      expect(c.limit).toBe(at);
      answer(c, 40, at / 2 - 1, 8_000); // answers again, below the limit: it does not grow
      c.ended({ startedAt: 9_000, failure: OVERLOADED }, sent(at, at), at, 9_100);
      const cut = c.limit;
      expect(cut).toBe(Math.floor(0.7 * at));
      binding(c, 30, 10_000);
      // Square-root growth from the cut (slow start back to 100 would add 30).
      expect(c.limit - cut).toBeLessThan(6);
    }
  });

  it("with no overload for 30 s and the load well below it, it lifts (no cap while nothing is wrong)", () => {
    const c = new AdaptiveConcurrency();
    answer(c, 20, 100, 0);
    c.ended({ startedAt: 5, failure: OVERLOADED }, sent(100, 200, true), 100, 1_000);
    expect(c.limit).toBe(70);
    c.ended({ startedAt: 31_500 }, sent(10, 70), 10, 31_500);
    // Unarmed again: only pace, twice the most in flight as answers came.
    expect(c.limit).toBe(200);
  });

  it("property: whatever the upstream answers, the limit is a number >= 1, a failure never raises it, and a cut leaves at most 0.7 of what was in flight at send", () => {
    const event = fc.record({
      kind: fc.constantFrom("ok", "overloaded", "timeout", "rate"),
      inFlight: fc.integer({ min: 0, max: 500 }),
      held: fc.boolean(),
      dt: fc.integer({ min: 0, max: 40_000 }),
      rtt: fc.integer({ min: 1, max: 10_000 }),
    });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 300 }), (events) => {
        const c = new AdaptiveConcurrency();
        let now = 0;
        for (const e of events) {
          now += e.dt;
          const failure =
            e.kind === "ok"
              ? undefined
              : e.kind === "overloaded"
                ? OVERLOADED
                : e.kind === "timeout"
                  ? TIMED_OUT
                  : RATE_LIMITED;
          const before = c.limit;
          const at = sent(Math.max(1, e.inFlight), before, e.held);
          c.ended({ startedAt: now - e.rtt, failure }, at, e.inFlight, now);
          const l = c.limit;
          if (Number.isNaN(l) || l < 1) return false;
          // A failure never raises it, and moves it only by a cut (answers move the pace too).
          if (failure !== undefined && l > before) return false;
          const cut = failure !== undefined && l < before;
          if (cut && l > Math.max(1, Math.floor(0.7 * at.inFlightAtSend))) return false;
        }
        return true;
      }),
    );
  });
});
