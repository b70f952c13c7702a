import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  CircuitBreaker,
  ledgerOf,
  policy,
  RetryBudget,
  reasonOf,
  VirtualClock,
} from "../../src/index.ts";
import { FakeStream, type StreamStep } from "../../src/testing/index.ts";
import { drive, driveError, httpError } from "../helpers.ts";

declare function gc(): void;

type Chunk = { text?: string; meta?: boolean };
const text = (t: string, afterMs = 10): StreamStep<Chunk> => ({ chunk: { text: t }, afterMs });
const listeners = (s: AbortSignal) => getEventListeners(s, "abort").length;
/** One turn of the event loop: the shared listener of an emptied signal goes then. */
const turn = () => new Promise((r) => setImmediate(r));

/** A breaker that opened and has waited out `openMs`: the next attempt is its probe. */
async function halfOpen(clock: VirtualClock, probeTimeoutMs?: number) {
  const breaker = new CircuitBreaker({
    clock,
    consecutiveFailures: 1,
    openMs: 1_000,
    ...(probeTimeoutMs && { probeTimeoutMs }),
  });
  breaker.onFailure();
  await clock.advance(1_000);
  expect(breaker.state).toBe("half-open");
  return breaker;
}

let warnings: string[] = [];
const onWarning = (w: Error) => void warnings.push(`${w.name}: ${w.message}`);
beforeEach(() => {
  warnings = [];
  process.on("warning", onWarning);
});
afterEach(() => void process.off("warning", onWarning));

describe("the breaker never wedges half-open (docs/architecture.md, rule 12)", () => {
  it("a probe whose classification throws still frees its slot", async () => {
    const clock = new VirtualClock();
    const breaker = await halfOpen(clock);
    const p = policy({
      clock,
      breaker,
      classify: () => {
        throw new Error("classifier bug");
      },
    });
    const provider = httpError(503);
    const e = await driveError(
      clock,
      p.execute(async () => Promise.reject(provider)),
    );
    expect(e).toBe(provider); // the provider's error, not the hook's
    expect(ledgerOf(e)?.hookErrors.map((h) => h.hook)).toEqual(["classify"]);
    expect(
      await drive(
        clock,
        p.execute(async () => "ok"),
      ),
    ).toEqual({ ok: true, value: "ok" });
    expect(breaker.state).toBe("closed");
  });

  it("a stream probe its consumer leaves before any content frees the slot", async () => {
    const clock = new VirtualClock();
    const breaker = await halfOpen(clock);
    const p = policy({ clock, breaker });
    const s = p.stream(() => new FakeStream<Chunk>(clock, [{ stall: true }]));
    const pending = s.next();
    await clock.advance(10);
    await s.return();
    await pending.catch(() => {});
    expect(breaker.state).toBe("half-open");
    expect(breaker.tryAcquire()).toBe(true); // the slot is free for the next probe
  });

  it("a stream probe aborted by its caller while nobody reads frees the slot at once", async () => {
    const clock = new VirtualClock();
    const breaker = await halfOpen(clock);
    const p = policy({ clock, breaker });
    const caller = new AbortController();
    const source = new FakeStream<Chunk>(clock, [text("a"), { stall: true }]);
    const s = p.stream(() => source, { signal: caller.signal });
    await drive(clock, s.next());
    caller.abort(new Error("user left"));
    await turn();
    expect(source.closed).toBe(true); // the HTTP request is closed without a reader
    expect(breaker.tryAcquire()).toBe(true);
    expect(listeners(caller.signal)).toBe(0);
  });

  it("a stream probe cut by its idle timeout while nobody reads reports, and the breaker reopens", async () => {
    const clock = new VirtualClock();
    const breaker = await halfOpen(clock);
    const p = policy({ clock, breaker, idleTimeoutMs: 500 });
    const source = new FakeStream<Chunk>(clock, [text("a"), { stall: true }]);
    const s = p.stream(() => source);
    await drive(clock, s.next());
    await clock.advance(600);
    expect(source.closed).toBe(true);
    expect(breaker.state).toBe("open"); // a timeout says the upstream is not well
    expect(clock.pending).toBe(0);
    await clock.advance(1_000);
    expect(breaker.tryAcquire()).toBe(true); // and it probes again later
  });

  it("a probe that never reports frees its slot after probeTimeoutMs", async () => {
    const clock = new VirtualClock();
    const breaker = await halfOpen(clock, 5_000);
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    await clock.advance(5_000);
    expect(breaker.tryAcquire()).toBe(true);
  });

  it("a stream dropped mid-answer with no timer left is collected, and lets go of all it held", async () => {
    const clock = new VirtualClock();
    const breaker = await halfOpen(clock);
    const p = policy({ clock, breaker });
    const caller = new AbortController(); // long-lived
    const sources: FakeStream<Chunk>[] = [];
    await (async () => {
      const s = p.stream(
        () => {
          const f = new FakeStream<Chunk>(clock, [text("a", 0), { stall: true }]);
          sources.push(f);
          return f;
        },
        { signal: caller.signal },
      );
      await drive(clock, s.next());
    })();
    expect(listeners(caller.signal)).toBe(1);
    // Each of the three is let go by a cleanup of its own (the source and the grants when the
    // attempt's grip is collected; the listener when its watcher is, at the end of that
    // turn), which a collection of a larger heap may run in different turns: wait for all.
    let free = false;
    for (let i = 0; i < 100 && !free; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
      free = sources[0]!.closed && listeners(caller.signal) === 0 && breaker.tryAcquire();
    }
    expect(sources[0]!.closed).toBe(true);
    expect(listeners(caller.signal)).toBe(0);
  });
});

describe("hooks never change the outcome or cost anything", () => {
  it("an onRetry that throws: the retry happens; ten such calls do not empty the budget", async () => {
    const clock = new VirtualClock();
    const budget = new RetryBudget({ maxTokens: 10, tokenRatio: 0.1 });
    const p = policy({
      clock,
      budget,
      onRetry: () => {
        throw new Error("hook bug");
      },
    });
    for (let i = 0; i < 10; i++) {
      let n = 0;
      const r = await drive(
        clock,
        p.execute(async () => {
          if (n++ === 0) throw httpError(503);
          return "ok";
        }),
      );
      expect(r).toEqual({ ok: true, value: "ok" });
    }
    expect(budget.tokens).toBe(1); // ten retries withdrawn, ten successes deposited
    expect(warnings.filter((w) => w.includes("onRetry hook threw"))).toHaveLength(10);
  });

  it("onGiveUp, onSuccess and usage that throw: the caller sees the call's own outcome", async () => {
    const clock = new VirtualClock();
    const boom = () => {
      throw new Error("hook bug");
    };
    const p = policy({ clock, onGiveUp: boom, onSuccess: boom, usage: boom });
    expect(
      await drive(
        clock,
        p.execute(async () => 42),
      ),
    ).toEqual({ ok: true, value: 42 });
    const bad = httpError(400);
    expect(
      await driveError(
        clock,
        p.execute(async () => Promise.reject(bad)),
      ),
    ).toBe(bad);
    expect(ledgerOf(bad)?.hookErrors.map((h) => h.hook)).toEqual(["onGiveUp"]);
  });

  it("a random source out of [0, 1) never shortens the server's Retry-After", async () => {
    for (const r of [-3, 7, Number.NaN]) {
      const clock = new VirtualClock();
      const p = policy({ clock, random: () => r });
      const at: number[] = [];
      await drive(
        clock,
        p.execute(async () => {
          at.push(clock.now());
          if (at.length === 1) throw httpError(429, { headers: { "retry-after": "2" } });
          return "ok";
        }),
      );
      expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(2_000);
      expect(at[1]! - at[0]!).toBeLessThanOrEqual(2_400);
    }
  });

  it("restart mode's onDiscard that throws: the retry goes on", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    let opened = 0;
    const s = p.stream(
      () =>
        new FakeStream<Chunk>(
          clock,
          opened++ === 0 ? [text("a"), { error: httpError(503) }] : [text("b"), text("c")],
        ),
      {
        mode: "restart",
        onDiscard: () => {
          throw new Error("ui bug");
        },
      },
    );
    const got: string[] = [];
    await drive(
      clock,
      (async () => {
        for await (const c of s) got.push(c.text ?? "");
      })(),
    );
    expect(got).toEqual(["a", "b", "c"]);
    expect(s.ledger.hookErrors.map((h) => h.hook)).toEqual(["onDiscard"]);
  });
});

describe("streams and signals leave nothing behind", () => {
  it("10k streams created and never read register nothing on the caller's signal", () => {
    const p = policy();
    const caller = new AbortController();
    for (let i = 0; i < 10_000; i++) p.stream(async function* () {}, { signal: caller.signal });
    expect(listeners(caller.signal)).toBe(0);
  });

  it("a stream left after two reads with timers armed: cut, then no listener and no timer", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, idleTimeoutMs: 1_000, deadlineMs: 60_000 });
    const caller = new AbortController();
    const source = new FakeStream<Chunk>(clock, [text("a"), text("b"), { stall: true }]);
    const s = p.stream(() => source, { signal: caller.signal });
    await drive(clock, s.next());
    await drive(clock, s.next());
    expect(listeners(caller.signal)).toBe(1);
    await clock.advance(1_500);
    await turn();
    expect(source.closed).toBe(true);
    expect(clock.pending).toBe(0);
    expect(listeners(caller.signal)).toBe(0);
  });

  it("a thousand concurrent calls on one signal hold one listener, and none after", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const caller = new AbortController();
    const calls = Array.from({ length: 1_000 }, () =>
      p.execute(({ signal }) => clock.sleep(100, signal).then(() => "ok"), {
        signal: caller.signal,
      }),
    );
    await turn();
    expect(listeners(caller.signal)).toBe(1);
    await clock.advance(100);
    expect(await Promise.all(calls)).toHaveLength(1_000);
    await turn();
    expect(listeners(caller.signal)).toBe(0);
    expect(warnings.filter((w) => w.includes("MaxListeners"))).toEqual([]);
  });

  it("an operation that throws a hostile value leaks neither a listener nor a timer", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, attemptTimeoutMs: 5_000 });
    const caller = new AbortController();
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    // (A revoked Proxy cannot be returned from an async function: it is wrapped here.)
    const r = await drive(
      clock,
      p.execute(async () => Promise.reject(proxy), { signal: caller.signal }),
    );
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toBe(proxy);
    await turn();
    expect(clock.pending).toBe(0);
    expect(listeners(caller.signal)).toBe(0);
    expect(reasonOf(!r.ok && r.error)).toBe("not-retryable");
  });
});
