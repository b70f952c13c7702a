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
