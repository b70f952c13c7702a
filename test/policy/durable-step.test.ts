import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/core/breaker.ts";
import { RetryBudget } from "../../src/core/budget.ts";
import { VirtualClock } from "../../src/core/clock.ts";
import { BreakwaterError, ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { handoff } from "../../src/core/handoff.ts";
import { ConfigError } from "../../src/core/validate.ts";
import { durableStep, type StepOutcome } from "../../src/policy/durable-step.ts";
import { fallback } from "../../src/policy/fallback.ts";
import { policy } from "../../src/policy/policy.ts";
import { drive, driveError, httpError } from "../helpers.ts";

// A durable step (docs/architecture.md, rule 22): short waits slept here, longer ones
// handed to the engine with the step's state, so the engine and breakwater never multiply.

const limited = (seconds: number) =>
  httpError(429, { headers: { "retry-after": String(seconds) } });

/** An upstream that answers each request from `script` (an error to throw, or a value). */
function upstream(script: unknown[]) {
  let sent = 0;
  const call = async () => {
    const next = script[Math.min(sent++, script.length - 1)];
    if (next instanceof Error) throw next;
    return next as string;
  };
  return { call, sent: () => sent };
}

describe("durableStep", () => {
  it("hands a 20 s Retry-After to the engine instead of sleeping it, then goes on from the state", async () => {
    const clock = new VirtualClock(1_000);
    const p = policy({ clock, random: () => 0.5 });
    const u = upstream([limited(20), "answer"]);
    const first = await drive(clock, durableStep(p, u.call));
    expect(first.ok).toBe(true);
    const leg = (first as { value: StepOutcome<string> }).value;
    expect(leg.ok).toBe(false);
    if (leg.ok) return;
    expect(leg.reason).toBe("deferred");
    expect(leg.waitMs).toBeGreaterThanOrEqual(20_000);
    expect(leg.waitMs).toBeLessThanOrEqual(30_000);
    expect(leg.state).toMatchObject({ spent: 1, legs: 1, deadlineAt: null, why: "retry-after" });
    expect(clock.now()).toBe(1_000); // nothing slept in this process
    expect(JSON.parse(JSON.stringify(leg.state))).toEqual(leg.state); // the engine journals it
    await clock.advance(leg.waitMs); // the engine's timer
    const waits: number[] = [];
    const p2 = policy({ clock, random: () => 0.5, onWait: (e) => void waits.push(e.ms) });
    const second = await drive(clock, durableStep(p2, u.call, { state: leg.state }));
    expect(second).toEqual({ ok: true, value: { ok: true, value: "answer" } });
    expect(u.sent()).toBe(2);
    expect(waits).toEqual([leg.waitMs]); // the engine's wait is told as the leg begins
  });

  it("sleeps a short backoff in the process: one leg, the value", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, random: () => 0.5 });
    const u = upstream([httpError(503), "answer"]);
    const r = await drive(clock, durableStep(p, u.call));
    expect(r).toEqual({ ok: true, value: { ok: true, value: "answer" } });
    expect(u.sent()).toBe(2);
  });

  it("spends the policy's attempts once across legs: three 20 s waits send 3 requests, not 9", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, random: () => 0.5 });
    const u = upstream([limited(20)]);
    let state: Extract<StepOutcome<string>, { ok: false }>["state"] | undefined;
    let error: unknown;
    for (let legs = 0; legs < 10 && error === undefined; legs++) {
      const r = await drive(clock, durableStep(p, u.call, { state }));
      if (!r.ok) error = r.error;
      else if (!r.value.ok) {
        state = r.value.state;
        await clock.advance(r.value.waitMs);
      }
    }
    expect(u.sent()).toBe(3);
    expect(state?.legs).toBe(2);
    expect(reasonOf(error)).toBe("attempts-exhausted");
  });

  it("throws what the engine must not retry: a 400 once, a Retry-After past the cap, a spent budget", async () => {
    const clock = new VirtualClock();
    const context = httpError(400, { error: { code: "context_length_exceeded" } });
    const u = upstream([context]);
    const e1 = await driveError(clock, durableStep(policy({ clock }), u.call));
    expect(u.sent()).toBe(1);
    expect(reasonOf(e1)).toBe("not-retryable");
    expect(handoff(e1, clock.now(), Number.POSITIVE_INFINITY, 30_000).waitMs).toBeUndefined();

    const long = upstream([limited(40)]);
    const e2 = await driveError(clock, durableStep(policy({ clock }), long.call));
    expect(reasonOf(e2)).toBe("retry-after-too-long");
    expect(long.sent()).toBe(1);

    // The engine's wait is a retry: the admission is asked before it is handed over.
    const budget = new RetryBudget({ maxTokens: 1, tokenRatio: 0.1 });
    budget.tryAcquire();
    const empty = upstream([limited(20)]);
    const e3 = await driveError(clock, durableStep(policy({ clock, budget }), empty.call));
    expect(reasonOf(e3)).toBe("budget");
  });

  it("keeps the step's deadline across legs: a wait that would pass it ends the step", async () => {
    const clock = new VirtualClock(0);
    const p = policy({ clock, random: () => 0, deadlineMs: 30_000 });
    const u = upstream([limited(20), limited(20), "late"]);
    const r = await drive(clock, durableStep(p, u.call));
    const leg = (r as { value: StepOutcome<string> }).value;
    if (leg.ok) throw new Error("expected a wait");
    expect(leg.state.deadlineAt).toBe(30_000);
    await clock.advance(leg.waitMs); // 20 s: 10 s left, and the next 429 asks for 20 more
    const e = await driveError(clock, durableStep(p, u.call, { state: leg.state }));
    expect(reasonOf(e)).toBe("deadline");
    expect(u.sent()).toBe(2);
  });

  it("hands an open breaker's cool-off and a 429's hold on every call to the engine", async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 1, openMs: 10_000 });
    const p = policy({ clock, breaker, random: () => 0.5 });
    const down = upstream([httpError(500)]);
    await drive(clock, durableStep(p, down.call, { holdMs: 1_000_000 })).catch(() => {});
    await clock.advance(2_000);
    const r = await drive(clock, durableStep(p, upstream(["ok"]).call));
    const leg = (r as { value: StepOutcome<string> }).value;
    expect(leg).toMatchObject({ ok: false, reason: "circuit-open", waitMs: 8_000 });
    if (!leg.ok) expect(leg.state).toMatchObject({ spent: 0, why: "cooldown" });

    const q = policy({ clock, random: () => 0.5 });
    await drive(clock, durableStep(q, upstream([limited(20)]).call));
    const other = upstream(["ok"]);
    const held = await drive(clock, durableStep(q, other.call));
    const h = (held as { value: StepOutcome<string> }).value;
    expect(h).toMatchObject({ ok: false, reason: "rate-limit-wait" });
    if (!h.ok) expect(h.state).toMatchObject({ spent: 0, why: "rate-limit" });
    expect(other.sent()).toBe(0); // refused before sending
  });

  it("validates its own options by name", async () => {
    const p = policy();
    await expect(durableStep(p, async () => 1, { holdMs: -1 })).rejects.toThrow(ConfigError);
    await expect(durableStep(p, async () => 1, { holdMs: -1 })).rejects.toThrow(/holdMs/);
    await expect(durableStep(p, async () => 1, { state: { spent: -1 } as never })).rejects.toThrow(
      /option "state"/,
    );
    await expect(p.execute(async () => 1, { deferAfterMs: -5 })).rejects.toThrow(/deferAfterMs/);
  });

  it("a deferred call names its wait on a BreakwaterError, with the ledger of what it sent", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, random: () => 0.5 });
    const e = await driveError(
      clock,
      p.execute(upstream([limited(12)]).call, { deferAfterMs: 5_000 }),
    );
    expect(e).toBeInstanceOf(BreakwaterError);
    expect(reasonOf(e)).toBe("deferred");
    expect((e as BreakwaterError).retryAfterMs).toBeGreaterThanOrEqual(12_000);
    expect(ledgerOf(e)?.attempts.length).toBe(1);
    // An adapter that hands it on in its SDK's class (the AI SDK's) keeps the wait.
    const wrapped = Object.assign(new Error("APICallError"), { cause: e, isRetryable: false });
    expect(handoff(wrapped, clock.now(), Number.POSITIVE_INFINITY, 30_000)).toEqual({
      reason: "deferred",
      waitMs: (e as BreakwaterError).retryAfterMs,
    });
  });

  it("a chain switches inside the step; only when no upstream can take the call is the wait the engine's", async () => {
    const clock = new VirtualClock();
    const mk = () => policy({ clock, random: () => 0.5 });
    const a = upstream([limited(20), "from a"]);
    const b = upstream(["from b"]);
    const chain = fallback([
      { name: "a", policy: mk(), call: a.call },
      { name: "b", policy: mk(), call: b.call },
    ]);
    const r = await drive(clock, durableStep(chain, undefined));
    expect(r).toEqual({ ok: true, value: { ok: true, value: "from b" } }); // switched, no wait
    expect(clock.now()).toBe(0);

    const c = upstream([limited(20), "from c"]);
    const d = upstream([limited(20), "from d"]);
    const both = fallback([
      { name: "c", policy: mk(), call: c.call },
      { name: "d", policy: mk(), call: d.call },
    ]);
    const first = await drive(clock, durableStep(both, undefined));
    const leg = (first as { value: StepOutcome<string> }).value;
    if (leg.ok) throw new Error("expected the engine's wait");
    expect(leg.waitMs).toBeGreaterThanOrEqual(20_000);
    expect(leg.state.spent).toBe(2);
    await clock.advance(leg.waitMs);
    const second = await drive(clock, durableStep(both, undefined, { state: leg.state }));
    expect(second).toEqual({ ok: true, value: { ok: true, value: "from c" } });
    expect(c.sent() + d.sent()).toBe(3);
  });
});
