import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { systemClock, VirtualClock } from "../../src/core/clock.ts";

describe("VirtualClock", () => {
  it("fires timers in time order, then in scheduling order", async () => {
    const clock = new VirtualClock(1000);
    const seen: string[] = [];
    clock.schedule(30, () => seen.push("c"));
    clock.schedule(10, () => seen.push("a"));
    clock.schedule(10, () => seen.push("b"));
    await clock.advance(20);
    expect(seen).toEqual(["a", "b"]);
    expect(clock.now()).toBe(1020);
    await clock.advance(10);
    expect(seen).toEqual(["a", "b", "c"]);
  });

  it("lets promise callbacks settle between timers, so awaiting code sees time move", async () => {
    const clock = new VirtualClock();
    const times: number[] = [];
    const loop = async () => {
      for (let i = 0; i < 3; i++) {
        await clock.sleep(100);
        await Promise.resolve();
        await Promise.resolve();
        times.push(clock.now());
      }
    };
    const done = loop();
    await clock.advance(1000);
    await done;
    expect(times).toEqual([100, 200, 300]);
  });

  it("rejects a sleep at once on abort and leaves no timer behind", async () => {
    const clock = new VirtualClock();
    const ac = new AbortController();
    const p = clock.sleep(60_000, ac.signal);
    expect(clock.pending).toBe(1);
    ac.abort(new Error("stop"));
    await expect(p).rejects.toThrow("stop");
    expect(clock.pending).toBe(0);
    expect(clock.now()).toBe(0);
  });

  it("rejects a sleep on an already aborted signal without scheduling", async () => {
    const clock = new VirtualClock();
    await expect(clock.sleep(5, AbortSignal.abort(new Error("early")))).rejects.toThrow("early");
    expect(clock.pending).toBe(0);
  });

  it("cancelled timers never fire", async () => {
    const clock = new VirtualClock();
    let fired = false;
    const cancel = clock.schedule(5, () => {
      fired = true;
    });
    cancel();
    cancel();
    await clock.advance(10);
    expect(fired).toBe(false);
    expect(clock.pending).toBe(0);
  });

  it("keeps order across many timers (heap)", async () => {
    const clock = new VirtualClock();
    const seen: number[] = [];
    const delays = Array.from({ length: 500 }, (_, i) => (i * 7919) % 1000);
    for (const d of delays) clock.schedule(d, () => seen.push(clock.now()));
    await clock.runAll();
    expect(seen).toEqual([...delays].sort((a, b) => a - b));
  });

  it("rejects bad input", async () => {
    expect(() => new VirtualClock(Number.NaN)).toThrow(/startMs/);
    await expect(new VirtualClock().advance(-1)).rejects.toThrow(/ms must be >= 0/);
  });
});

/**
 * A little world on a clock: timers whose callbacks start promise chains of random depth
 * that schedule, cancel and sleep on the clock; everything that happens, in order.
 */
async function world(perTurn: number, plan: readonly (readonly [number, number, number])[]) {
  const clock = new VirtualClock(0, { perTurn });
  const seen: string[] = [];
  const cancels: (() => void)[] = [];
  const chain = async (id: number, depth: number) => {
    for (let i = 0; i < depth; i++) await Promise.resolve();
    seen.push(`${id}@${clock.now()}`);
  };
  plan.forEach(([at, depth, act], id) => {
    cancels.push(
      clock.schedule(at, () => {
        seen.push(`fire ${id}@${clock.now()}`);
        void chain(id, depth).then(async () => {
          // What the chain does once it has run: cancel a later timer, or sleep and note.
          if (act % 3 === 0) cancels[(id + 1) % cancels.length]!();
          else if (act % 3 === 1) {
            await clock.sleep(act % 50);
            seen.push(`woke ${id}@${clock.now()}`);
          }
        });
      }),
    );
  });
  if (plan.length % 2 === 0) await clock.runAll();
  else {
    await clock.advance(500);
    await clock.advance(1_000);
  }
  return seen;
}

describe("VirtualClock({ perTurn })", () => {
  it("several timers a turn of the loop: the same world as one a turn", async () => {
    const plan = fc.array(fc.tuple(fc.nat(400), fc.nat(40), fc.nat(100)), { maxLength: 60 });
    await fc.assert(
      fc.asyncProperty(plan, fc.constantFrom(2, 8, 64, 1024), async (p, perTurn) => {
        expect(await world(perTurn, p)).toEqual(await world(1, p));
      }),
      { numRuns: 150 },
    );
  });

  it("a timer's promise callbacks settle before the next timer fires", async () => {
    const clock = new VirtualClock(0, { perTurn: 64 });
    let cancelled = false;
    let cancelB: () => void = () => {};
    clock.schedule(10, () => {
      void (async () => {
        for (let i = 0; i < 100; i++) await Promise.resolve();
        cancelB();
      })();
    });
    cancelB = clock.schedule(10, () => {
      cancelled = true; // fires only if A's chain had not run before it
    });
    expect(await clock.runAll()).toBe(1);
    expect(cancelled).toBe(false);
  });

  it("names the option and what it takes", () => {
    for (const bad of [0, 1.5, -1, 70_000, Number.NaN])
      expect(() => new VirtualClock(0, { perTurn: bad })).toThrow(
        /"perTurn" must be an integer from 1 to 65536/,
      );
  });
});

describe("systemClock", () => {
  it("sleeps for real and aborts at once", async () => {
    const t0 = performance.now();
    await systemClock.sleep(20);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(15);
    const ac = new AbortController();
    const p = systemClock.sleep(10_000, ac.signal);
    const t1 = performance.now();
    ac.abort(new Error("now"));
    await expect(p).rejects.toThrow("now");
    expect(performance.now() - t1).toBeLessThan(1000);
  });
});
