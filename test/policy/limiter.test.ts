import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/core/breaker.ts";
import { VirtualClock } from "../../src/core/clock.ts";
import { BreakwaterError, reasonOf } from "../../src/core/errors.ts";
import type { Ledger } from "../../src/core/ledger.ts";
import { RateLimiter } from "../../src/core/limiter.ts";
import type { PolicyOptions, WaitEvent } from "../../src/policy/options.ts";
import { policy } from "../../src/policy/policy.ts";
import { Run } from "../../src/run/run.ts";
import { FakeStream } from "../../src/testing/index.ts";
import { drive, driveError, httpError } from "../helpers.ts";

declare function gc(): void;

const setup = (
  limits: ConstructorParameters<typeof RateLimiter>[0] = {},
  more: PolicyOptions = {},
) => {
  const clock = new VirtualClock();
  const limiter = new RateLimiter({ clock, ...limits });
  const p = policy({ clock, limiter, budget: false, ...more });
  const sent: number[] = [];
  const op = () => {
    sent.push(clock.now());
    return "ok";
  };
  return { clock, limiter, p, sent, op };
};

describe("a policy with a rate limiter", () => {
  it("a 429's hold past the cap (retryAfter.maxMs, 30 s by default) refuses a call at once; a cap raised past it waits it out", async () => {
    for (const [maxMs, expected] of [
      [30_000, ["rate-limit-wait", 40_000, 0, []]],
      [60_000, [undefined, undefined, 40_000, [["rate-limit", 40_000]]]],
    ] as const) {
      const waits: WaitEvent[] = [];
      const { clock, p, limiter, op } = setup(
        {},
        { retryAfter: { maxMs }, onWait: (e) => void waits.push(e) },
      );
      limiter.hold(40_000); // a 429 said Retry-After: 40
      const r = await drive(clock, p.execute(op));
      const e = r.ok ? undefined : r.error;
      expect([
        reasonOf(e),
        (e as BreakwaterError | undefined)?.retryAfterMs,
        clock.now(),
        waits.map((w) => [w.why, w.ms]),
      ]).toEqual(expected);
    }
  });

  it('retryAfter.beyondMax "wait-max": a Retry-After past the cap holds the limiter only the cap, and the retry goes then', async () => {
    const { clock, p } = setup({}, { retryAfter: { maxMs: 30_000, beyondMax: "wait-max" } });
    let n = 0;
    const sent: number[] = [];
    const op = () => {
      sent.push(clock.now());
      if (n++ === 0) throw httpError(429, { headers: { "retry-after": "120" } });
      return "ok";
    };
    expect(await drive(clock, p.execute(op))).toEqual({ ok: true, value: "ok" });
    expect(sent).toEqual([0, 30_000]);
  });

  it("a wait that ends refused is told all the same, and the refusal names no wait of 0 ms", async () => {
    const waits: WaitEvent[] = [];
    const { clock, p, limiter } = setup(
      { maxConcurrent: 1 },
      { onWait: (e) => void waits.push(e) },
    );
    limiter.tryAcquire({}); // the one slot, never given back
    const e = await driveError(
      clock,
      p.execute(() => "x", { deadlineMs: 5_000 }),
    );
    expect(reasonOf(e)).toBe("rate-limit-wait");
    expect((e as Error).message).not.toMatch(/retry after 0 ms/);
    expect(waits.map((w) => [w.why, w.ms])).toEqual([["rate-limit", clock.now()]]);
    expect(clock.now()).toBeGreaterThan(0);
  });

  it("a stream's wait is timed from its first read, not from when the stream was made", async () => {
    const waits: WaitEvent[] = [];
    const { clock, p } = setup(
      { limits: { requestsPerMinute: 4 } },
      { onWait: (e) => void waits.push(e) },
    );
    await Promise.all([
      p.execute(() => 1),
      p.execute(() => 2),
      p.execute(() => 3),
      p.execute(() => 4),
    ]);
    const s = p.stream(async function* () {
      yield "a";
    });
    await clock.advance(5_000);
    const read = (async () => {
      for await (const _ of s);
    })();
    await drive(clock, read);
    expect(waits.map((w) => [w.why, w.ms])).toEqual([["rate-limit", 10_000]]);
  });

  it("a wait within the cap is told to onWait and counted in the ledger as waited", async () => {
    const waits: WaitEvent[] = [];
    const { clock, p, op } = setup(
      { limits: { requestsPerMinute: 4 } },
      { onWait: (e) => void waits.push(e), onSuccess: (e) => void ledgers.push(e.ledger) },
    );
    const ledgers: Ledger[] = [];
    await Promise.all([p.execute(op), p.execute(op), p.execute(op), p.execute(op)]);
    await drive(clock, p.execute(op));
    expect(waits.map((w) => [w.why, w.ms, w.attempt, w.failure])).toEqual([
      ["rate-limit", 15_000, 1, undefined],
    ]);
    expect(ledgers.at(-1)!.waitedMs).toBe(15_000);
    expect(ledgers.at(-1)!.attempts[0]!.waitMs).toBe(15_000);
  });

  it("waits for room instead of sending into the limit", async () => {
    const { clock, p, sent, op } = setup({ limits: { requestsPerMinute: 2 } });
    const calls = [p.execute(op), p.execute(op), p.execute(op)];
    await drive(clock, Promise.all(calls));
    expect(sent).toEqual([0, 0, 30_000]);
  });

  it("refuses at once, before sending, a call whose deadline the wait would pass", async () => {
    const { clock, limiter, p, sent, op } = setup({ limits: { requestsPerMinute: 1 } });
    await p.execute(op);
    const e = await driveError(clock, p.execute(op, { deadlineAt: 10_000 }));
    expect(e).toBeInstanceOf(BreakwaterError);
    expect(reasonOf(e)).toBe("rate-limit-wait");
    expect((e as BreakwaterError).retryAfterMs).toBe(60_000);
    expect(sent).toEqual([0]);
    expect(limiter.inFlight).toBe(0);
    expect(limiter.queued).toBe(0);
  });

  it("a caller's abort ends the wait at once, with the caller's reason", async () => {
    const { clock, limiter, p, sent, op } = setup({ maxConcurrent: 1 });
    let release!: () => void;
    const first = p.execute(() => new Promise<void>((r) => (release = r)));
    const ac = new AbortController();
    const second = p.execute(op, { signal: ac.signal });
    await clock.advance(10);
    expect(limiter.queued).toBe(1);
    ac.abort(new Error("user left"));
    await expect(second).rejects.toThrow("user left");
    expect(reasonOf(await second.catch((e) => e))).toBe("cancelled");
    expect(limiter.queued).toBe(0);
    release();
    await first;
    expect(limiter.inFlight).toBe(0);
    expect(sent).toEqual([]);
  });

  it("settles each attempt with its usage: the unspent allowance goes back", async () => {
    const { p, limiter } = setup({ limits: { tokensPerMinute: 10_000 } });
    await p.execute(() => ({ used: 150 }), {
      cost: { inputTokens: 100, outputTokens: 2000 },
      usage: (r) => ({ inputTokens: 100, outputTokens: (r as { used: number }).used - 100 }),
    });
    expect(limiter.snapshot().tokens?.level).toBe(10_000 - 150);
    expect(limiter.inFlight).toBe(0);
  });

  it("a 429 with Retry-After holds every call sharing the limiter", async () => {
    const { clock, p, sent, op } = setup();
    let first = true;
    const failing = p.execute(() => {
      sent.push(clock.now());
      if (first) {
        first = false;
        throw httpError(429, { headers: { "retry-after": "5" } });
      }
      return "ok";
    });
    await clock.advance(1);
    const other = p.execute(op);
    await drive(clock, Promise.all([failing, other]));
    expect(sent[0]).toBe(0);
    // The other call went only once the hold had passed (retries wait U(5 s, 10 s)).
    expect(Math.min(...sent.slice(1))).toBeGreaterThanOrEqual(5_000);
  });

  it("every way out of an attempt gives its permit back", async () => {
    const { clock, limiter, p } = setup({ maxConcurrent: 1 });
    await driveError(
      clock,
      p.execute(() => Promise.reject(httpError(400))),
    );
    expect(limiter.inFlight).toBe(0);
    await driveError(
      clock,
      p.execute(() => Promise.reject(httpError(503))),
    );
    expect(limiter.inFlight).toBe(0);
    // A breaker that refuses after the permit was granted: the permit is cancelled.
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 1 });
    breaker.onFailure();
    const q = policy({ clock, limiter, breaker, budget: false });
    expect(
      reasonOf(
        await driveError(
          clock,
          q.execute(() => "x"),
        ),
      ),
    ).toBe("circuit-open");
    expect(limiter.inFlight).toBe(0);
    // A stream whose consumer leaves.
    const s = p.stream(async function* () {
      yield "a";
      yield "b";
    });
    for await (const _ of s) break;
    expect(limiter.inFlight).toBe(0);
  });

  it("a stream waits for room before it opens", async () => {
    const { clock, p, limiter } = setup({ limits: { requestsPerMinute: 1 } });
    await p.execute(() => "x");
    const opened: number[] = [];
    const s = p.stream(async function* () {
      opened.push(clock.now());
      yield "a";
    });
    const read = (async () => {
      const out: string[] = [];
      for await (const c of s) out.push(c);
      return out;
    })();
    const r = await drive(clock, read);
    expect(r).toEqual({ ok: true, value: ["a"] });
    expect(opened).toEqual([60_000]);
    expect(limiter.inFlight).toBe(0);
  });
});

describe("streams and the limiter", () => {
  it("a consumer that leaves during the wait leaves the queue at once", async () => {
    const { clock, p, limiter } = setup({ maxConcurrent: 1 });
    const held = limiter.tryAcquire({})!;
    const s = p.stream(async function* () {
      yield "a";
    });
    const first = s.next();
    await clock.advance(1);
    expect(limiter.queued).toBe(1);
    await s.return();
    await first.catch(() => {});
    expect(limiter.queued).toBe(0);
    held.settle();
    expect(limiter.inFlight).toBe(0);
  });

  it("a stream dropped mid-answer without return() gives its permit back when collected", async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ clock, maxConcurrent: 1 });
    const p = policy({ clock, limiter, budget: false });
    await (async () => {
      // A chunk, then a stall for good: no timer is left to cut it.
      const s = p.stream(
        () => new FakeStream(clock, [{ chunk: "a", afterMs: 0 }, { stall: true }]),
      );
      await drive(clock, s.next());
    })();
    expect(limiter.inFlight).toBe(1);
    for (let i = 0; i < 100 && limiter.inFlight > 0; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(limiter.inFlight).toBe(0);
  });
});

describe("the limiter option", () => {
  it("takes a RateLimiter, its options, or any Limiter; anything else is named", async () => {
    expect(() => policy({ limiter: 5 as never })).toThrow(
      /policy: option "limiter" must be a Limiter .*; got 5/,
    );
    expect(() => policy({ limiter: { maxConcurent: 2 } as never })).toThrow(/maxConcurent/);
    const clock = new VirtualClock();
    expect(policy({ clock, limiter: { maxConcurrent: 2 } }).options.limiter).toBeInstanceOf(
      RateLimiter,
    );
    // Your own (a shared store's): asked with the call's cost and its run tree.
    const asked: unknown[] = [];
    const settled: unknown[] = [];
    const mine = {
      tryAcquire: (cost: unknown, group: unknown) => {
        asked.push({ cost, group });
        return { settle: (u: unknown) => settled.push(u), cancel: () => settled.push("cancel") };
      },
      acquire: () => Promise.reject(new Error("never")),
      observeHeaders: () => {},
      hold: () => {},
      headroom: () => 1,
    };
    const run = new Run({ clock });
    const p = policy({ clock, limiter: mine });
    await p.execute(() => 1, {
      run: run.child(),
      cost: { inputTokens: 5, outputTokens: 7 },
      usage: () => ({ inputTokens: 5, outputTokens: 2 }),
    });
    expect(asked).toEqual([{ cost: { inputTokens: 5, outputTokens: 7 }, group: run }]);
    expect(settled).toEqual([{ inputTokens: 5, outputTokens: 2 }]);
    await expect(p.execute(() => 1, { cost: { inputTokens: -1 } })).rejects.toThrow(
      /cost.inputTokens/,
    );
  });
});

describe("a limiter that fails", () => {
  it("lets calls go and never changes an outcome (a broken gate must not stop traffic)", async () => {
    const clock = new VirtualClock();
    const boom = () => {
      throw new Error("store down");
    };
    const throwing = {
      tryAcquire: boom,
      acquire: boom,
      observeHeaders: boom,
      hold: boom,
      headroom: () => 1,
    };
    const p = policy({ clock, limiter: throwing, budget: false, backoff: { baseMs: 1, capMs: 1 } });
    expect(await p.execute(() => "ok")).toBe("ok");
    const e = await driveError(
      clock,
      p.execute(() => Promise.reject(httpError(429, { headers: { "retry-after": "1" } }))),
    );
    expect((e as { status: number }).status).toBe(429);
    // A permit that throws on settle, an acquire that rejects with its own error.
    let n = 0;
    const flaky = {
      tryAcquire: () => (n++ === 0 ? undefined : { settle: boom, cancel: boom }),
      acquire: () => Promise.reject(new Error("store down")),
      observeHeaders: () => {},
      hold: () => {},
      headroom: () => 1,
    };
    const q = policy({ clock, limiter: flaky, budget: false });
    expect(await q.execute(() => "first")).toBe("first");
    expect(await q.execute(() => "second")).toBe("second");
  });
});

describe("the run tree under a rate limiter", () => {
  it("a child run's calls count on its parent, within the parent's deadline", async () => {
    const clock = new VirtualClock();
    const parent = new Run({ clock, deadlineMs: 10_000, maxAttempts: 3 });
    const child = parent.child({ deadlineMs: 60_000 });
    expect(child.deadline).toBe(10_000);
    expect(child.priority).toBe(-1);
    expect(child.root).toBe(parent);
    expect(child.id).toBe(`${parent.id}.1`);
    expect(parent.child().id).toBe(`${parent.id}.2`);
    const p = policy({ clock, budget: false, backoff: { baseMs: 1, capMs: 1 } });
    await drive(
      clock,
      p.execute(() => "ok", { run: child }).then(() => 0),
    );
    expect(parent.stats.calls).toBe(1);
    expect(parent.stats.attempts).toBe(1);
    const e = await driveError(
      clock,
      p.execute(() => Promise.reject(httpError(503)), { run: child }),
    );
    // The parent's cap of 3 attempts holds over the child, which has none of its own.
    expect(reasonOf(e)).toBe("run-attempts");
    expect(parent.stats.attempts).toBe(3);
    expect(() => parent.child({ clock: new VirtualClock() })).toThrow(
      /Run.child: option "clock" must be the parent's clock/,
    );
    expect(() => new Run({ priority: Number.NaN })).toThrow(/priority.*finite number/);
  });

  it("parent calls go before their children's (newest first among equals), and the tree shares one cap", async () => {
    const clock = new VirtualClock();
    const limiter = new RateLimiter({ clock, maxConcurrent: 1, maxConcurrentPerRun: 1 });
    const p = policy({ clock, limiter, budget: false });
    const parent = new Run({ clock });
    const other = new Run({ clock });
    const kids = [parent.child(), parent.child()];
    const order: string[] = [];
    let release!: () => void;
    const blocker = p.execute(() => new Promise<void>((r) => (release = r)));
    const call = (name: string, run: Run) =>
      p.execute(
        () => {
          order.push(name);
        },
        { run },
      );
    const all = [
      call("kid1", kids[0]!),
      call("kid2", kids[1]!),
      call("parent", parent),
      call("other", other),
    ];
    await clock.advance(1);
    release();
    await blocker;
    await drive(clock, Promise.all(all));
    expect(order).toEqual(["other", "parent", "kid2", "kid1"]);
  });
});
