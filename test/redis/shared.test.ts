import { createClient } from "redis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { reasonOf } from "../../src/core/errors.ts";
import { failure } from "../../src/core/failure.ts";
import { RateLimiter } from "../../src/core/limiter.ts";
import { policy } from "../../src/policy/policy.ts";
import { type SharedState, sharedState } from "../../src/redis/index.ts";
import { startRedis, type TestRedis } from "../fixtures/redis.ts";
import { httpError } from "../helpers.ts";

// A real redis-server on loopback. Each "process" is its own client and its own shared
// state, as separate processes are: everything they share goes through Redis.
let redis: TestRedis;
const open: { close(): void }[] = [];
const clients: { close(): Promise<unknown> }[] = [];
let n = 0;

beforeAll(async () => {
  redis = await startRedis();
}, 30_000);
afterEach(async () => {
  for (const o of open.splice(0)) o.close();
  for (const c of clients.splice(0)) await c.close().catch(() => {});
});
afterAll(async () => {
  await redis?.stop();
});

async function processes(
  count: number,
  options: { syncMs?: number; staleAfterMs?: number; prefix?: string } = {},
) {
  const prefix = options.prefix ?? `t${++n}`;
  const out: SharedState[] = [];
  for (let i = 0; i < count; i++) {
    const client = createClient({
      url: redis.url,
      disableOfflineQueue: true,
      socket: { reconnectStrategy: () => 50, connectTimeout: 500 },
    });
    client.on("error", () => {});
    await client.connect();
    clients.push(client);
    const s = sharedState({
      client,
      prefix,
      syncMs: options.syncMs ?? 20,
      timeoutMs: 100,
      staleAfterMs: options.staleAfterMs ?? 300,
    });
    open.push(s);
    out.push(s);
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a retry budget shared through Redis", () => {
  it("the fleet spends at most its bucket, wherever the retries come from; successes refill it", async () => {
    // Syncs only when asked (and when a lease runs out), so the test decides the order.
    const [a, b] = await processes(2, { syncMs: 60_000, staleAfterMs: 60_000 });
    const ba = a!.budget("openai", { maxTokens: 10, tokenRatio: 0.1, leaseTokens: 2 });
    const bb = b!.budget("openai", { maxTokens: 10, tokenRatio: 0.1, leaseTokens: 2 });
    const before = a!.stats.syncs;
    await Promise.all([a!.sync(), b!.sync()]); // before it, each decides alone
    expect(a!.stats).toMatchObject({ syncs: before + 1, failures: 0, healthy: true });
    let granted = 0;
    for (let i = 0; i < 40; i++) {
      for (const x of [ba, bb]) if (x.tryAcquire()) granted++;
      await Promise.all([a!.fleet.sync(), b!.fleet.sync()]);
    }
    expect(granted).toBe(10); // one bucket for the fleet, not 10 per process
    for (let i = 0; i < 100; i++) bb.onSuccess(); // b's successes earn 10 tokens
    await b!.fleet.sync();
    await a!.fleet.sync();
    let again = 0;
    for (let i = 0; i < 30; i++) {
      if (ba.tryAcquire()) again++;
      await a!.fleet.sync();
    }
    expect(again + bb.leaseTokens).toBe(10); // b took its lease of the refill when it synced
  });
});

describe("adaptive admission shared through Redis", () => {
  it("a process that sent nothing knows the upstream is saturated", async () => {
    const [a, b] = await processes(2);
    const aa = a!.admission("anthropic", { random: () => 0.5 });
    const ab = b!.admission("anthropic", { random: () => 0.5, burst: 0 });
    for (let i = 0; i < 200; i++) aa.onFailure(failure("overloaded"));
    await a!.fleet.sync();
    await b!.fleet.sync();
    expect(ab.rejectProbability).toBeGreaterThan(0.99);
    expect(ab.tryAcquire(failure("overloaded"))).toBe(false);
  });

  it("refuses the fleet's share from the runs not yet under way first (rule 23)", async () => {
    const [a, b] = await processes(2);
    const aa = a!.admission("mistral", { random: () => 0.6 });
    const ab = b!.admission("mistral", { random: () => 0.6, burst: 0 });
    // The fleet saw a quarter of its attempts accepted, all in process a: p ≈ 0.5.
    for (let i = 0; i < 200; i++) {
      if (i % 4 === 0) aa.onSuccess();
      else aa.onFailure(failure("overloaded"));
    }
    await a!.fleet.sync();
    await b!.fleet.sync();
    expect(ab.rejectProbability).toBeGreaterThan(0.45);
    expect(ab.rejectProbability).toBeLessThan(0.55);
    const verdicts = [];
    for (let i = 0; i < 20; i++)
      verdicts.push([
        ab.tryAcquire(failure("overloaded"), { started: false }),
        ab.tryAcquire(failure("overloaded"), { started: true }),
      ]);
    // Past the first asks (the mix is learned from them): every new run's refused, every
    // started run's admitted, though the draw (0.6) is above the fleet's share.
    expect(verdicts.slice(5)).toEqual(Array(15).fill([false, true]));
  });
});

describe("a breaker shared through Redis", () => {
  it("the first process to open it opens it for all, within one sync", async () => {
    const [a, b] = await processes(2, { syncMs: 25 });
    const ka = a!.breaker("gemini", { consecutiveFailures: 3, openMs: 2000 });
    const kb = b!.breaker("gemini", { consecutiveFailures: 3, openMs: 2000 });
    await sleep(60);
    expect(kb.tryAcquire()).toBe(true);
    kb.onSuccess();
    for (let i = 0; i < 3; i++) {
      ka.tryAcquire();
      ka.onFailure();
    }
    const t0 = Date.now();
    while (kb.state !== "open" && Date.now() - t0 < 2000) await sleep(5);
    const fleetWideMs = Date.now() - t0;
    expect(kb.state).toBe("open");
    expect(kb.tryAcquire()).toBe(false);
    expect(fleetWideMs).toBeLessThan(500); // one sync (25 ms) with room for a busy machine
  });
});

describe("a breaker shared through Redis, by the fleet's counts", () => {
  it("opens for all once the fleet's failures cross the ratio, before any process sees enough alone", async () => {
    const ps = await processes(5, { syncMs: 25 });
    // Each needs 20 outcomes of its own to judge; the fleet has them after 4 each.
    const ks = ps.map((p) =>
      p.breaker("fleetwide", { minimumThroughput: 20, failureRatio: 0.5, openMs: 2000.5 }),
    );
    for (const k of ks) {
      for (let i = 0; i < 4; i++) {
        k.tryAcquire();
        k.onFailure();
      }
      expect(k.state).toBe("closed"); // 4 failures: too few to judge alone
    }
    const t0 = Date.now();
    while (ks.some((k) => k.state !== "open") && Date.now() - t0 < 2000) await sleep(5);
    expect(ks.map((k) => k.state)).toEqual(["open", "open", "open", "open", "open"]);
    expect(Date.now() - t0).toBeLessThan(500);
    expect(ps[0]!.fleet.healthy).toBe(true); // a fractional openMs is a whole PX for Redis
  });
});

describe("when Redis fails", () => {
  it("killed mid-run: calls go on with local decisions, nothing throws from Redis; it rejoins when back", async () => {
    const [a] = await processes(1, { syncMs: 20, staleAfterMs: 200 });
    const p = policy({
      maxAttempts: 3,
      backoff: { baseMs: 1, capMs: 2 },
      budget: a!.budget("svc", { maxTokens: 50, leaseTokens: 5 }),
      breaker: a!.breaker("svc", { consecutiveFailures: 1000 }),
    });
    let attempts = 0;
    const flaky = () => {
      attempts++;
      if (attempts % 3 === 1) throw httpError(503);
      return "ok";
    };
    const outcomes: string[] = [];
    const loop = (async () => {
      for (let i = 0; i < 150; i++) {
        outcomes.push(
          await p.execute(flaky).then(
            () => "ok",
            (e) => `${reasonOf(e)}: ${(e as Error).message}`,
          ),
        );
        await sleep(4);
      }
    })();
    await sleep(100);
    expect(a!.fleet.healthy).toBe(true);
    const killedAt = Date.now();
    await redis.kill();
    while (a!.fleet.healthy && Date.now() - killedAt < 3000) await sleep(5);
    const toLocalMs = Date.now() - killedAt;
    expect(a!.fleet.healthy).toBe(false);
    expect(toLocalMs).toBeLessThan(1000); // staleAfterMs 200 + a sync
    await sleep(100);
    await redis.restart();
    const back = Date.now();
    while (!a!.fleet.healthy && Date.now() - back < 5000) await sleep(10);
    expect(a!.fleet.healthy).toBe(true);
    await loop;
    // Every call ended with the policy's own outcome (a retried 503, a retry the budget
    // refused while a lease ran dry), never with an error from Redis.
    const other = outcomes.filter(
      (o) =>
        o !== "ok" && !o.startsWith("attempts-exhausted: HTTP 503") && !o.startsWith("budget:"),
    );
    expect(other).toEqual([]);
    expect(outcomes.filter((o) => o === "ok").length).toBeGreaterThan(135);
    expect(a!.fleet.stats.failures).toBeGreaterThan(0);
  }, 30_000);

  it("slow: a stalled Redis never holds a decision; the process goes local, then rejoins", async () => {
    const [a] = await processes(1, { syncMs: 20, staleAfterMs: 150 });
    const budget = a!.budget("slow", { maxTokens: 10 });
    await sleep(60);
    const staller = createClient({ url: redis.url });
    staller.on("error", () => {});
    await staller.connect();
    await staller.sendCommand(["CLIENT", "PAUSE", "600", "ALL"]);
    await sleep(250);
    expect(a!.fleet.healthy).toBe(false);
    const t0 = performance.now();
    for (let i = 0; i < 1000; i++) budget.tryAcquire();
    expect(performance.now() - t0).toBeLessThan(100); // local decisions, no round trip
    await staller.close();
    const t1 = Date.now();
    while (!a!.fleet.healthy && Date.now() - t1 < 3000) await sleep(10);
    expect(a!.fleet.healthy).toBe(true);
  }, 20_000);

  it("names bad options", async () => {
    const [a] = await processes(1);
    expect(() => sharedState({ client: {} as never })).toThrow(/fleet: option "client"/);
    expect(() => sharedState({ client: { sendCommand: async () => 0 }, syncMs: 0 })).toThrow(
      /syncMs/,
    );
    expect(() => a!.budget("x{y}")).toThrow(/upstream/);
    expect(() => a!.budget("x", { leaseTokens: 0 })).toThrow(/leaseTokens/);
    expect(() => a!.budget("x", { maxTokens: 0 })).toThrow(/maxTokens/);
  });
});

describe("a fleet whose Redis is not there", () => {
  it("a client not connected is refused at once, saying what to do", () => {
    const client = createClient({ url: redis.url });
    expect(() => sharedState({ client })).toThrow(
      /sharedState: option "client" must be a connected client \(await client.connect\(\) first\)/,
    );
  });

  it("the fleet page's client (docs/fleet.md) gives up connecting to an unreachable Redis in seconds, with a clear error", async () => {
    const { freePort } = await import("../fixtures/ports.ts");
    const url = `redis://127.0.0.1:${await freePort()}`; // nothing listens there
    const started = Date.now();
    // As docs/fleet.md writes it: retries while it has been up, gives up if it never was.
    let up = false;
    const client = createClient({
      url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: 2_000,
        reconnectStrategy: (retries: number): number | Error =>
          up || retries < 3
            ? Math.min(200 * 2 ** retries, 2_000)
            : new Error(`Redis at ${url} is unreachable`),
      },
    });
    client.on("ready", () => {
      up = true;
    });
    client.on("error", () => {});
    await expect(client.connect()).rejects.toThrow(/unreachable|ECONNREFUSED/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe("a rate limiter's 429 holds shared through Redis", () => {
  it("a hold heard in one process holds the others for what is left of it; a shorter one changes nothing", async () => {
    const [a, b, c] = await processes(3);
    const limiters = [a!, b!, c!].map((s) => s.limiter("openai", new RateLimiter()));
    await Promise.all([a!, b!, c!].map((s) => s.sync()));
    expect(limiters.map((l) => l.heldForMs())).toEqual([0, 0, 0]);
    limiters[0]!.hold(5_000);
    await sleep(20); // published on the spot
    await Promise.all([b!.sync(), c!.sync()]);
    for (const l of limiters) {
      expect(l.heldForMs()).toBeGreaterThan(4_000);
      expect(l.heldForMs()).toBeLessThanOrEqual(5_000);
      expect(l.calm).toBe(false);
    }
    limiters[2]!.hold(1_000); // shorter: the fleet's hold stays the longer one
    await sleep(20);
    await a!.sync();
    expect(limiters[0]!.heldForMs()).toBeGreaterThan(4_000);
  });

  it("with Redis away, a process holds for what it heard itself", async () => {
    const [a] = await processes(1);
    const l = a!.limiter("anthropic", new RateLimiter());
    await redis.kill();
    try {
      l.hold(2_000);
      await a!.sync().catch(() => {});
      expect(l.heldForMs()).toBeGreaterThan(1_500);
    } finally {
      await redis.restart();
    }
  });
});

describe("a rate limiter's spending shared through Redis", () => {
  it("three processes under one key's 10 requests a minute let 10 go in all, not 30", async () => {
    const [a, b, c] = await processes(3);
    const limiters = [a!, b!, c!].map((s) =>
      s.limiter("openai:key-1", new RateLimiter({ limits: { requestsPerMinute: 10 } })),
    );
    await Promise.all([a!, b!, c!].map((s) => s.sync())); // joined: nothing owed from before
    let sent = 0;
    for (let i = 0; i < 6; i++) if (limiters[0]!.tryAcquire({}) !== undefined) sent++;
    expect(sent).toBe(6);
    await a!.sync(); // published
    await Promise.all([b!.sync(), c!.sync()]); // the others take the six from their buckets
    for (const l of limiters.slice(1)) expect(l.headroom()).toBeCloseTo(0.4, 1);
    // What is left (4) is left to the fleet: one process spends it, the others then have none.
    for (let i = 0; i < 4; i++) expect(limiters[1]!.tryAcquire({})).toBeDefined();
    await b!.sync();
    await Promise.all([a!.sync(), c!.sync()]);
    expect(limiters[2]!.tryAcquire({})).toBeUndefined();
    expect(limiters[0]!.tryAcquire({})).toBeUndefined();
  });

  it("tokens too: a process's estimates count against the others' token buckets", async () => {
    const [a, b] = await processes(2);
    const [la, lb] = [a!, b!].map((s) =>
      s.limiter("anthropic:key-2", new RateLimiter({ limits: { tokensPerMinute: 10_000 } })),
    );
    await Promise.all([a!.sync(), b!.sync()]);
    expect(la!.tryAcquire({ inputTokens: 4_000, outputTokens: 2_000 })).toBeDefined();
    await a!.sync();
    await b!.sync();
    expect(lb!.headroom()).toBeCloseTo(0.4, 1);
    expect(lb!.tryAcquire({ inputTokens: 4_000, outputTokens: 2_000 })).toBeUndefined();
  });

  it("with Redis away, what a process spent is kept and told when it is back", async () => {
    const [a, b] = await processes(2);
    const [la, lb] = [a!, b!].map((s) =>
      s.limiter("google:key-3", new RateLimiter({ limits: { requestsPerMinute: 10 } })),
    );
    await Promise.all([a!.sync(), b!.sync()]);
    await redis.kill();
    try {
      for (let i = 0; i < 5; i++) expect(la!.tryAcquire({})).toBeDefined();
      await a!.sync().catch(() => {}); // fails: nothing is told
      expect(lb!.headroom()).toBeGreaterThan(0.95);
    } finally {
      await redis.restart();
    }
    // Told at the first sync that lands once Redis is back (the client reconnects first).
    for (let tries = 0; Math.abs(lb!.headroom() - 0.5) > 0.05; tries++) {
      if (tries > 100) throw new Error(`never told: headroom ${lb!.headroom()}`);
      await sleep(50);
      await a!.sync().catch(() => {});
      await b!.sync().catch(() => {});
    }
  });

  it("counts what was spent, not what was reserved: a call never sent counts nothing, a settled one its usage", async () => {
    const [a, b] = await processes(2);
    const [la, lb] = [a!, b!].map((s) =>
      s.limiter(
        "openai:key-4",
        new RateLimiter({ limits: { requestsPerMinute: 10, tokensPerMinute: 10_000 } }),
      ),
    );
    await Promise.all([a!.sync(), b!.sync()]);
    for (let i = 0; i < 8; i++) la!.tryAcquire({})!.cancel(); // never sent
    const call = la!.tryAcquire({ inputTokens: 500, outputTokens: 8_000 })!;
    await a!.sync();
    await b!.sync();
    expect(lb!.headroom()).toBeCloseTo(0.15, 1); // 8 500 tokens reserved, 1 request
    call.settle({ inputTokens: 500, outputTokens: 50 }); // spent 550 of them
    await a!.sync();
    await b!.sync();
    expect(lb!.headroom()).toBeCloseTo(0.9, 1); // the request, the tightest now: 9 of 10
    expect(lb!.tryAcquire({ inputTokens: 9_000 })).toBeDefined(); // 9 450 tokens left
  });

  it("an answer's headers, which count the whole key, are not taken from again at the next sync", async () => {
    const [a, b] = await processes(2);
    const [la, lb] = [a!, b!].map((s) =>
      s.limiter("openai:key-5", new RateLimiter({ limits: { requestsPerMinute: 10 } })),
    );
    await Promise.all([a!.sync(), b!.sync()]);
    for (let i = 0; i < 4; i++) la!.tryAcquire({});
    await a!.sync();
    // b hears an answer that says what is left for the key: 6 (a's four counted there).
    lb!.observeHeaders({
      "x-ratelimit-limit-requests": "10",
      "x-ratelimit-remaining-requests": "6",
    });
    await b!.sync();
    expect(lb!.headroom()).toBeCloseTo(0.6, 1); // not 0.2
  });

  it("a process that joins owes what the others spent this minute: a restart spends no fresh bucket", async () => {
    const [a] = await processes(1);
    const la = a!.limiter("openai:key-6", new RateLimiter({ limits: { requestsPerMinute: 10 } }));
    await a!.sync();
    for (let i = 0; i < 6; i++) expect(la.tryAcquire({})).toBeDefined();
    await a!.sync();
    const [b] = await processes(1, { prefix: a!.fleet.prefix });
    const lb = b!.limiter("openai:key-6", new RateLimiter({ limits: { requestsPerMinute: 10 } }));
    await b!.sync(); // its first
    expect(lb.headroom()).toBeCloseTo(0.4, 1);
  });
});
