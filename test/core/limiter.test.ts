import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/core/clock.ts";
import { type Permit, RateLimiter, RateLimitWaitError } from "../../src/core/limiter.ts";

const settled = async <T>(p: Promise<T>) => {
  let state: "pending" | "resolved" | "rejected" = "pending";
  p.then(
    () => void (state = "resolved"),
    () => void (state = "rejected"),
  );
  await Promise.resolve();
  await Promise.resolve();
  return state;
};

describe("RateLimiter", () => {
  it("lets everything through with no limits and no headers (fails open)", () => {
    const l = new RateLimiter({ clock: new VirtualClock() });
    for (let i = 0; i < 10_000; i++) expect(l.tryAcquire({ inputTokens: 1e6 })).toBeDefined();
    expect(l.headroom()).toBe(1);
  });

  it("works on a clock before 0 (a virtual clock started in the past holds nothing)", () => {
    const l = new RateLimiter({ clock: new VirtualClock(-120_000) });
    expect(l.tryAcquire({})).toBeDefined();
    expect(l.headroom()).toBe(1);
  });

  it("holds requests per minute: a call over the limit waits for the refill, then goes", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ limits: { requestsPerMinute: 60 }, clock });
    for (let i = 0; i < 60; i++) expect(l.tryAcquire({})).toBeDefined();
    expect(l.tryAcquire({})).toBeUndefined();
    const p = l.acquire({});
    expect(l.queued).toBe(1);
    await clock.advance(999);
    expect(await settled(p)).toBe("pending");
    await clock.advance(1);
    expect(await settled(p)).toBe("resolved");
    expect(l.queued).toBe(0);
  });

  it("refuses at once, with the wait it would need, a call whose deadline the wait passes", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ limits: { tokensPerMinute: 6000 }, clock });
    l.tryAcquire({ inputTokens: 6000 });
    const e = await l.acquire({ inputTokens: 600 }, { deadlineAt: 5000 }).catch((x) => x);
    expect(e).toBeInstanceOf(RateLimitWaitError);
    expect(e.waitMs).toBe(6000);
    expect(l.queued).toBe(0);
    // With room in its deadline it waits, and goes when 600 tokens have refilled.
    const ok = l.acquire({ inputTokens: 600 }, { deadlineAt: 6000 });
    await clock.advance(6000);
    expect(await settled(ok)).toBe("resolved");
  });

  it("drops a waiter once what is ahead of it makes its deadline unreachable", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ limits: { requestsPerMinute: 60 }, clock });
    for (let i = 0; i < 60; i++) l.tryAcquire({});
    const first = l.acquire({}, { priority: 1 });
    const second = l.acquire({}, { deadlineAt: 1500 }).catch((e: unknown) => e);
    await clock.advance(1000);
    expect(await settled(first)).toBe("resolved");
    // The refill went to the first; the second would need until 2000 > 1500.
    expect(await second).toBeInstanceOf(RateLimitWaitError);
    expect(l.queued).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it("a waiter held by a slot (not by the buckets) is refused when its deadline passes", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ maxConcurrent: 1, clock });
    l.tryAcquire({}); // held for good
    const p = l.acquire({}, { deadlineAt: 1000 }).catch((e: unknown) => e);
    await clock.advance(1000);
    expect(await settled(p)).toBe("pending");
    await clock.advance(1);
    expect(await p).toBeInstanceOf(RateLimitWaitError);
    expect(l.queued).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it("a permit settled after the server spoke gets no refund: the server's count rules", () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ limits: { tokensPerMinute: 10_000 }, clock });
    const p = l.tryAcquire({ inputTokens: 100, outputTokens: 4000 })!;
    l.observe({ tokens: { limit: 10_000, remaining: 0 } }); // its own answer's headers
    p.settle({ inputTokens: 100, outputTokens: 50 });
    expect(l.snapshot().tokens?.level).toBe(0);
    expect(l.tryAcquire({ inputTokens: 3000 })).toBeUndefined();
  });

  it("calls with no run take their turn with run trees, not always first", async () => {
    const l = new RateLimiter({ maxConcurrent: 2, clock: new VirtualClock() });
    const run = {};
    const a = l.tryAcquire({})!; // no run: one in flight
    l.tryAcquire({}); // and another
    const order: string[] = [];
    void l.acquire({}).then(() => order.push("no-run"));
    void l.acquire({}, { group: run }).then(() => order.push("run"));
    a.settle();
    await Promise.resolve();
    await Promise.resolve();
    expect(order).toEqual(["run"]); // the run tree had none in flight
  });

  it("a cancelled wait leaves the queue at once with the signal's reason", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ maxConcurrent: 1, clock });
    const held = l.tryAcquire({})!;
    const ac = new AbortController();
    const p = l.acquire({}, { signal: ac.signal });
    expect(l.queued).toBe(1);
    ac.abort(new Error("user left"));
    await expect(p).rejects.toThrow("user left");
    expect(l.queued).toBe(0);
    held.settle();
    expect(l.inFlight).toBe(0);
    await expect(l.acquire({}, { signal: AbortSignal.abort("gone") })).resolves.toBeDefined();
  });

  it("an aborted signal on a call that must wait rejects without queueing", async () => {
    const l = new RateLimiter({ maxConcurrent: 1, clock: new VirtualClock() });
    l.tryAcquire({});
    await expect(l.acquire({}, { signal: AbortSignal.abort("gone") })).rejects.toBe("gone");
    expect(l.queued).toBe(0);
  });

  it("caps calls in flight; a settle lets the next one in", async () => {
    const l = new RateLimiter({ maxConcurrent: 2, clock: new VirtualClock() });
    const a = l.tryAcquire({})!;
    l.tryAcquire({});
    const c = l.acquire({});
    expect(await settled(c)).toBe("pending");
    a.settle();
    expect(await settled(c)).toBe("resolved");
    expect(l.inFlight).toBe(2);
  });

  it("a waiter leaves once it can no longer be answered by its deadline: the calls' usual duration before it (rule 16)", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ maxConcurrent: 1, clock, limits: { requestsPerMinute: 1e6 } });
    const warm = l.tryAcquire({})!; // one call held 1 s: the usual duration is 1 s
    const sent = clock.now();
    await clock.advance(1000);
    warm.settle(undefined, { startedAt: sent });
    l.tryAcquire({}); // held for good
    const p = l.acquire({}, { deadlineAt: clock.now() + 3000 }).catch((e: unknown) => e);
    await clock.advance(1990);
    expect(await settled(p)).toBe("pending");
    await clock.advance(20); // 2 s in: sent now, it would end past its deadline
    expect(await p).toBeInstanceOf(RateLimitWaitError);
    expect(l.queued).toBe(0);
  });

  it("of equal priority, a call of a run under way goes before a new run's (rule 23)", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ maxConcurrent: 1, clock });
    const held = l.tryAcquire({})!;
    const order: string[] = [];
    const take = (name: string, o: { priority?: number; started?: boolean }) =>
      void l.acquire({}, o).then((p) => {
        order.push(name);
        p.settle();
      });
    take("started-old", { started: true });
    take("new", { started: false });
    take("no-run", {}); // a call with no run counts as under way
    take("new-crit", { started: false, priority: 1 });
    take("new-newest", { started: false });
    held.settle();
    for (let i = 0; i < 8; i++) await new Promise((r) => setImmediate(r));
    expect(order).toEqual(["new-crit", "no-run", "started-old", "new-newest", "new"]);
  });

  it("serves higher priority first, then a call about to miss its deadline, then the newest", async () => {
    const clock = new VirtualClock();
    const limits = { requestsPerMinute: 1e6 }; // known limits: every permit is measured
    const l = new RateLimiter({ maxConcurrent: 1, clock, limits });
    const order: string[] = [];
    const permits: Permit[] = [];
    // One call held 1 s: the calls' usual duration is 1 s.
    const warm = l.tryAcquire({})!;
    const sent = clock.now();
    await clock.advance(1000);
    warm.settle(undefined, { startedAt: sent });
    const first = l.tryAcquire({})!;
    const take = (name: string, o: { priority?: number; deadlineAt?: number } = {}) =>
      void l.acquire({}, o).then((p) => {
        order.push(name);
        permits.push(p);
      });
    take("old");
    take("due", { deadlineAt: clock.now() + 1500 }); // within two usual durations
    take("new");
    take("crit", { priority: 5 });
    // Two as near their deadline as "due", after it: of calls ranked alike, the one that
    // came first.
    take("due-2", { deadlineAt: clock.now() + 1500 });
    take("due-3", { deadlineAt: clock.now() + 1500 });
    first.settle();
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setImmediate(r));
      permits[i]?.settle();
    }
    // The critical call; those whose deadline is near, in their order; then the newest
    // before the oldest.
    expect(order).toEqual(["crit", "due", "due-2", "due-3", "new", "old"]);
  });

  it("caps each run tree's calls in flight, leaving room for the others", async () => {
    const l = new RateLimiter({ maxConcurrentPerRun: 2, clock: new VirtualClock() });
    const big = {};
    const small = {};
    expect(l.tryAcquire({}, big)).toBeDefined();
    expect(l.tryAcquire({}, big)).toBeDefined();
    expect(l.tryAcquire({}, big)).toBeUndefined();
    expect(l.tryAcquire({}, small)).toBeDefined();
  });

  it("refuses at once when the queue is full", async () => {
    const l = new RateLimiter({ maxConcurrent: 1, maxQueue: 1, clock: new VirtualClock() });
    l.tryAcquire({});
    void l.acquire({});
    await expect(l.acquire({})).rejects.toThrow("queue is full");
  });

  it("follows the server's headers: limit, remaining and the pace to the reset", async () => {
    const clock = new VirtualClock(1_000);
    const l = new RateLimiter({ clock });
    l.observeHeaders(
      {
        "x-ratelimit-limit-requests": "100",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "10s",
        "x-ratelimit-limit-tokens": "10000",
        "x-ratelimit-remaining-tokens": "9000",
        "x-ratelimit-reset-tokens": "600ms",
      },
      1_000,
    );
    expect(l.snapshot()).toEqual({
      requests: { level: 0, capacity: 100 },
      tokens: { level: 9000, capacity: 10000 },
    });
    expect(l.tryAcquire({})).toBeUndefined();
    // 100 requests over the 10 s to the reset: one every 100 ms.
    const p = l.acquire({});
    await clock.advance(99);
    expect(await settled(p)).toBe("pending");
    await clock.advance(1);
    expect(await settled(p)).toBe("resolved");
  });

  it("reads RFC 3339 resets against the wall clock and moves them onto its own", async () => {
    const clock = new VirtualClock(0);
    const l = new RateLimiter({ clock });
    const wall = Date.parse("2026-11-30T10:00:00Z");
    l.observeHeaders(
      {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2026-11-30T10:00:05Z",
      },
      wall,
    );
    const p = l.acquire({});
    await clock.advance(99);
    expect(await settled(p)).toBe("pending");
    await clock.advance(1); // 50 over 5 s: one per 100 ms
    expect(await settled(p)).toBe("resolved");
  });

  it("spends what others spent (a fleet's other processes) from the buckets it knows, and refills it", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ clock, limits: { requestsPerMinute: 10, tokensPerMinute: 1_000 } });
    l.spend({ requests: 4, tokens: 900, inputTokens: 50 }); // no input bucket: nothing to take
    expect(l.headroom()).toBeCloseTo(0.1, 6); // tokens, the tightest
    expect(l.tryAcquire({ inputTokens: 200 })).toBeUndefined();
    l.spend({ requests: Number.NaN, tokens: Number.POSITIVE_INFINITY }); // nothing broken
    expect(l.headroom()).toBeCloseTo(0.1, 6);
    l.spend({ tokens: -50 }); // reserved elsewhere and not spent: given back
    expect(l.headroom()).toBeCloseTo(0.15, 6);
    l.spend({ tokens: 50 });
    await clock.advance(6_000); // a tenth of the window refills a tenth
    expect(l.headroom()).toBeCloseTo(0.2, 6);
    expect(l.tryAcquire({ inputTokens: 150 })).toBeDefined();
    // Headers heard since the last call count the whole key already: not taken again.
    l.observe({ requests: { limit: 10, remaining: 5 } });
    l.spend({ requests: 3 });
    expect(l.snapshot().requests!.level).toBeCloseTo(5, 6);
    l.spend({ requests: 3 }); // the next call, with no headers between, takes it
    expect(l.snapshot().requests!.level).toBeCloseTo(2, 6);
    const blank = new RateLimiter({ clock });
    blank.spend({ requests: 100 }); // no limits known: it still fails open
    expect(blank.tryAcquire({})).toBeDefined();
  });

  it("a hold (a 429's Retry-After) stops everything until it passes", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ clock });
    l.hold(2000);
    expect(l.headroom()).toBe(0);
    expect(l.tryAcquire({})).toBeUndefined();
    await expect(l.acquire({}, { deadlineAt: 1000 })).rejects.toMatchObject({ waitMs: 2000 });
    const p = l.acquire({});
    await clock.advance(2000);
    expect(await settled(p)).toBe("resolved");
  });

  it("settles with actual usage: the unspent output allowance comes back", () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ limits: { tokensPerMinute: 10_000 }, clock });
    const p = l.tryAcquire({ inputTokens: 1000, outputTokens: 4000 })!;
    expect(l.snapshot().tokens?.level).toBe(5000);
    p.settle({ inputTokens: 1000, outputTokens: 200 });
    expect(l.snapshot().tokens?.level).toBe(8800);
    // A failure with no usage keeps its input, gives back its output allowance.
    const f = l.tryAcquire({ inputTokens: 1000, outputTokens: 4000 })!;
    f.settle({});
    expect(l.snapshot().tokens?.level).toBe(7800);
    // A call never sent gives everything back.
    const c = l.tryAcquire({ inputTokens: 1000, outputTokens: 4000 })!;
    c.cancel();
    c.settle({ inputTokens: 0 }); // a second end is ignored
    expect(l.snapshot().tokens?.level).toBe(7800);
    expect(l.inFlight).toBe(0);
  });

  it("a call larger than the whole window waits for a full bucket and goes", async () => {
    const clock = new VirtualClock();
    const l = new RateLimiter({ limits: { tokensPerMinute: 1000 }, clock });
    l.tryAcquire({ inputTokens: 500 });
    const p = l.acquire({ inputTokens: 5000 });
    await clock.advance(30_000);
    expect(await settled(p)).toBe("resolved");
    expect(l.snapshot().tokens?.level).toBe(0);
  });

  it("names the option, the value and what is allowed", () => {
    expect(() => new RateLimiter({ limits: { requestsPerMinute: 0 } })).toThrow(
      /RateLimiter: option "limits.requestsPerMinute" must be a number >= 1; got 0|requestsPerMinute/,
    );
    expect(() => new RateLimiter({ maxConcurrent: 1.5 })).toThrow(
      /maxConcurrent.*integer >= 1.*1.5/,
    );
    expect(() => new RateLimiter({ maxQueue: -1 })).toThrow(/maxQueue/);
    expect(() => new RateLimiter({ clock: {} as never })).toThrow(/clock.*a Clock/);
    expect(() => new RateLimiter({ maxConcurent: 2 } as never)).toThrow(/maxConcurent/);
  });
});

describe("RateLimiter properties", () => {
  const op = fc.oneof(
    fc.record({
      t: fc.constant("take" as const),
      i: fc.nat(5000),
      o: fc.nat(5000),
    }),
    fc.record({ t: fc.constant("settle" as const), i: fc.nat(8000), o: fc.nat(8000) }),
    fc.record({ t: fc.constant("cancel" as const) }),
    fc.record({ t: fc.constant("time" as const), ms: fc.nat(20_000) }),
    fc.record({
      t: fc.constant("headers" as const),
      limit: fc.integer({ min: 1, max: 20_000 }),
      remaining: fc.integer({ min: -5, max: 30_000 }),
      reset: fc.nat(120),
    }),
  );

  it("a bucket never goes negative or over its limit; a refund never exceeds the acquire", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const clock = new VirtualClock();
        const l = new RateLimiter({
          limits: { tokensPerMinute: 10_000, requestsPerMinute: 30 },
          clock,
        });
        const held: Permit[] = [];
        for (const x of ops) {
          const before = l.snapshot();
          if (x.t === "take") {
            const p = l.tryAcquire({ inputTokens: x.i, outputTokens: x.o });
            if (p) held.push(p);
          } else if (x.t === "settle")
            held.shift()?.settle({ inputTokens: x.i, outputTokens: x.o });
          else if (x.t === "cancel") {
            const p = held.shift();
            p?.cancel();
            // What comes back is at most what was taken: never above the level before + taken.
          } else if (x.t === "time") void clock.advance(x.ms);
          else
            l.observeHeaders(
              {
                "x-ratelimit-limit-tokens": String(x.limit),
                "x-ratelimit-remaining-tokens": String(x.remaining),
                "x-ratelimit-reset-tokens": `${x.reset}s`,
              },
              0,
            );
          for (const [key, b] of Object.entries(l.snapshot())) {
            if (!(b.level >= 0 && b.level <= b.capacity + 1e-9))
              throw new Error(`${key} at ${b.level} of ${b.capacity}`);
          }
          void before;
        }
      }),
    );
  });

  it("take then settle with no more spent than reserved restores at most the level before", () => {
    fc.assert(
      fc.property(fc.nat(5000), fc.nat(5000), fc.nat(5000), fc.nat(5000), (i, o, si, so) => {
        const clock = new VirtualClock();
        const l = new RateLimiter({ limits: { tokensPerMinute: 10_000 }, clock });
        l.tryAcquire({ inputTokens: 3000 }); // not full, so a refund could overflow the start
        const start = l.snapshot().tokens!.level;
        const p = l.tryAcquire({ inputTokens: i, outputTokens: o });
        if (!p) return;
        p.settle({ inputTokens: Math.min(si, i), outputTokens: Math.min(so, o) });
        const after = l.snapshot().tokens!.level;
        expect(after).toBeLessThanOrEqual(start);
        expect(after).toBeGreaterThanOrEqual(start - i - o);
      }),
    );
  });
});
