import { describe, expect, it } from "vitest";
import { AdaptiveAdmission } from "../../src/core/admission.ts";
import { VirtualClock } from "../../src/core/clock.ts";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { durableStep } from "../../src/policy/durable-step.ts";
import { fallback } from "../../src/policy/fallback.ts";
import { DEADLINE_ATTEMPTS } from "../../src/policy/options.ts";
import { policy } from "../../src/policy/policy.ts";
import { partsOf } from "../../src/run/internal.ts";
import { Run } from "../../src/run/run.ts";
import { drive, driveError, httpError } from "../helpers.ts";

/** An operation that always fails with a 503, counting its attempts. */
function down() {
  let n = 0;
  const op = async () => {
    n++;
    throw httpError(503);
  };
  return { op, count: () => n };
}

/** No admission: what is tested is the cap, not what the upstream can take. */
const capOnly = { budget: false as const, backoff: { baseMs: 1, capMs: 1 } };

describe("a deadline is a budget to spend: the attempt cap is a backstop (rule 1)", () => {
  it("with no deadline, 3 attempts, what the SDKs send: a user who moves adds no load", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, ...capOnly });
    const d = down();
    const e = await driveError(clock, p.execute(d.op));
    expect(reasonOf(e)).toBe("attempts-exhausted");
    expect(d.count()).toBe(3);
    expect(p.options.maxAttempts).toBe(3);
  });

  it(`with a deadline (the call's or its run's), up to DEADLINE_ATTEMPTS (${DEADLINE_ATTEMPTS})`, async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, ...capOnly });
    for (const options of [
      { deadlineMs: 60_000 },
      { run: new Run({ clock, deadlineMs: 60_000 }) },
    ]) {
      const d = down();
      const e = await driveError(clock, p.execute(d.op, options));
      expect(reasonOf(e)).toBe("attempts-exhausted");
      expect(d.count()).toBe(DEADLINE_ATTEMPTS);
      expect(ledgerOf(e)?.attempts).toHaveLength(DEADLINE_ATTEMPTS);
    }
    // A policy's own deadline counts too.
    const own = policy({ clock, ...capOnly, deadlineMs: 60_000 });
    const d = down();
    await driveError(clock, own.execute(d.op));
    expect(d.count()).toBe(DEADLINE_ATTEMPTS);
  });

  it("the deadline ends it first when it comes first", async () => {
    const clock = new VirtualClock();
    const p = policy({
      clock,
      budget: false,
      backoff: { baseMs: 1_000, capMs: 1_000, jitter: "none" },
    });
    const d = down();
    const e = await driveError(clock, p.execute(d.op, { deadlineMs: 3_500 }));
    expect(reasonOf(e)).toBe("deadline");
    expect(d.count()).toBe(4); // at 0, 1, 2 and 3 s; the next wait would pass 3.5 s
  });

  it("a cap given caps every call, with a deadline or not; a call's own cap narrows it", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, ...capOnly, maxAttempts: 5 });
    expect(p.options.deadlineMaxAttempts).toBe(5);
    const d = down();
    await driveError(clock, p.execute(d.op, { deadlineMs: 60_000 }));
    expect(d.count()).toBe(5);
    const q = policy({ clock, ...capOnly });
    const e = down();
    await driveError(clock, q.execute(e.op, { deadlineMs: 60_000, maxAttempts: 2 }));
    expect(e.count()).toBe(2);
  });

  it("after our own timer cut an attempt, the cap is the no-deadline one: the upstream still works on what was left", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, ...capOnly, attemptTimeoutMs: 1_000 });
    let n = 0;
    const hang = (ctx: { signal: AbortSignal }) =>
      new Promise<never>((_, reject) => {
        n++;
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
      });
    const e = await driveError(clock, p.execute(hang, { deadlineMs: 60_000 }));
    expect(reasonOf(e)).toBe("attempt-timeout");
    expect(n).toBe(3);
  });

  it("a fallback chain with a deadline: the sum of its upstreams' deadline caps, each upstream its own", async () => {
    const clock = new VirtualClock();
    const a = down();
    const b = down();
    const chain = fallback([
      { name: "a", policy: policy({ clock, ...capOnly }), call: a.op },
      { name: "b", policy: policy({ clock, ...capOnly }), call: b.op },
    ]);
    expect(chain.limits.maxAttempts).toBe(6);
    expect(chain.limits.deadlineMaxAttempts).toBe(2 * DEADLINE_ATTEMPTS);
    await driveError(clock, chain.execute({ run: new Run({ clock, deadlineMs: 60_000 }) }));
    // A 503 at the first moves the call on at once while the next has room; the last
    // retries it while the deadline allows, up to its own cap.
    expect([a.count(), b.count()]).toEqual([1, DEADLINE_ATTEMPTS]);
    const c = down();
    const d = down();
    const bare = fallback([
      { name: "c", policy: policy({ clock, ...capOnly }), call: c.op },
      { name: "d", policy: policy({ clock, ...capOnly }), call: d.op },
    ]);
    await driveError(clock, bare.execute());
    expect([c.count(), d.count()]).toEqual([1, 3]);
  });

  it("a durable step's legs share the deadline cap when the step's run has a deadline", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, ...capOnly });
    const d = down();
    const run = new Run({ clock, deadlineMs: 60_000 });
    await driveError(clock, durableStep(p, d.op, { run }));
    expect(d.count()).toBe(DEADLINE_ATTEMPTS);
  });
});

describe("finish what was started (rule 23)", () => {
  it("a run is under way once one of its calls (or of a run of its tree) was answered", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const run = new Run({ clock, deadlineMs: 60_000 });
    const child = run.child();
    const limits = partsOf(child)!.limits;
    expect(limits.started).toBe(false);
    const failed = p.execute(() => Promise.reject(httpError(400)), { run: child });
    await driveError(clock, failed);
    expect(limits.started).toBe(false); // a failure pays for nothing
    await drive(
      clock,
      p.execute(async () => "ok", { run }),
    );
    expect(limits.started).toBe(true); // the parent's answer: the turn is under way
  });

  it("the admission refuses a new run's retry before a started run's, with the same policy", async () => {
    const clock = new VirtualClock();
    // A window where a quarter of the attempts were accepted: p ≈ 0.5.
    const admission = new AdaptiveAdmission({
      clock,
      burst: 0,
      minRetriesPerSecond: 0,
      random: () => 0.6,
    });
    for (let i = 0; i < 200; i++) {
      if (i % 4 === 0) admission.onSuccess();
      else admission.onFailure({ kind: "overloaded", retryable: true, status: 503 });
    }
    const p = policy({ clock, budget: admission, backoff: { baseMs: 1, capMs: 1 } });
    const started = new Run({ clock, deadlineMs: 60_000 });
    await drive(
      clock,
      p.execute(async () => "ok", { run: started }),
    );
    const outcomes: string[] = [];
    for (let i = 0; i < 6; i++) {
      const fresh = new Run({ clock, deadlineMs: 60_000 });
      for (const [name, run] of [
        ["new", fresh],
        ["started", started],
      ] as const) {
        let sent = 0;
        const r = await drive(
          clock,
          p.execute(
            async () => {
              if (sent++ === 0) throw httpError(503);
              return "ok";
            },
            { run },
          ),
        );
        outcomes.push(`${name}:${r.ok ? "retried" : reasonOf((r as { error: unknown }).error)}`);
      }
    }
    // Past the first asks (the mix is learned from them), every new run's retry is
    // refused and every started run's goes.
    expect(outcomes.slice(4)).toEqual(Array(4).fill(["new:budget", "started:retried"]).flat());
  });

  it("a custom admission is told whether the call's run is under way, and nothing more", async () => {
    const clock = new VirtualClock();
    const asks: unknown[] = [];
    const admission = {
      tryAcquire: (_f?: unknown, ask?: unknown) => asks.push(ask) > 0,
      onSuccess: () => {},
    };
    const p = policy({ clock, budget: admission, backoff: { baseMs: 1, capMs: 1 } });
    const run = new Run({ clock, deadlineMs: 60_000 });
    const flaky = () => {
      let n = 0;
      return async () => {
        if (n++ === 0) throw httpError(503);
        return "ok";
      };
    };
    await drive(clock, p.execute(flaky(), { run }));
    await drive(clock, p.execute(flaky(), { run }));
    await drive(clock, p.execute(flaky())); // no run: under way
    expect(asks).toEqual([{ started: false }, { started: true }, { started: true }]);
  });
});
