import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/core/clock.ts";
import { BreakwaterError, reasonOf } from "../../src/core/errors.ts";
import { RateLimiter } from "../../src/core/limiter.ts";
import type { PolicyOptions } from "../../src/policy/options.ts";
import { policy } from "../../src/policy/policy.ts";
import { pool } from "../../src/policy/pool.ts";
import { Run } from "../../src/run/run.ts";
import { drive, driveError, httpError } from "../helpers.ts";

/** Deployments whose answers the test scripts: `fail[name]` says what the next call gets. */
function setup(
  names: string[],
  extra: {
    limiters?: Record<string, RateLimiter>;
    clock?: VirtualClock;
    onWait?: PolicyOptions["onWait"];
  } = {},
) {
  const clock = extra.clock ?? new VirtualClock();
  const hits: string[] = [];
  const fail: Record<string, (() => unknown) | undefined> = {};
  const deps = names.map((name) => ({
    name,
    policy: policy({
      clock,
      maxAttempts: 1,
      budget: false,
      ...(extra.limiters?.[name] && { limiter: extra.limiters[name] }),
      ...(extra.onWait && { onWait: extra.onWait }),
    }),
    call: () => {
      hits.push(name);
      const e = fail[name]?.();
      if (e) throw e;
      return name;
    },
  }));
  return { clock, hits, fail, deps };
}

const rateLimited = (s: number) => () => httpError(429, { headers: { "retry-after": String(s) } });

describe("pool", () => {
  it("spreads calls over healthy deployments (least recently used first)", async () => {
    const { deps, hits } = setup(["a", "b", "c"]);
    const p = pool(deps);
    for (let i = 0; i < 6; i++) await p.execute();
    expect(hits).toEqual(["a", "b", "c", "a", "b", "c"]);
  });

  it("sends calls where the rate limits leave the most room", async () => {
    const clock = new VirtualClock();
    const a = new RateLimiter({ clock, limits: { requestsPerMinute: 10 } });
    const b = new RateLimiter({ clock, limits: { requestsPerMinute: 10 } });
    for (let i = 0; i < 5; i++) a.tryAcquire({})?.settle();
    const { deps, hits } = setup(["a", "b"], { limiters: { a, b }, clock });
    const p = pool(deps);
    await p.execute();
    expect(hits).toEqual(["b"]);
  });

  it("a 429 cools the deployment for its Retry-After; the call goes on to the next", async () => {
    const { deps, hits, fail, clock } = setup(["a", "b"]);
    const p = pool(deps, { cooldownMs: 1000 });
    fail.a = rateLimited(10);
    expect(await p.execute()).toBe("b");
    expect(p.cooldowns()).toEqual({ a: 10_000, b: Number.NEGATIVE_INFINITY });
    fail.a = undefined;
    hits.length = 0;
    await p.execute();
    await p.execute();
    expect(hits).toEqual(["b", "b"]); // a is cooling
    await clock.advance(10_000);
    await p.execute();
    expect(hits.at(-1)).toBe("a");
  });

  it("a cooldown lengthens while the deployment keeps failing, and resets on success", async () => {
    const { deps, fail, clock } = setup(["a", "b"]);
    const p = pool(deps, { cooldownMs: 5000, maxCooldownMs: 15_000 });
    fail.a = () => httpError(503);
    const cooldownsOfA: number[] = [];
    for (let i = 0; i < 4; i++) {
      const at = clock.now();
      await p.execute();
      cooldownsOfA.push(p.cooldowns().a! - at);
      await clock.advance(p.cooldowns().a! - clock.now());
    }
    expect(cooldownsOfA).toEqual([5000, 10_000, 15_000, 15_000]);
    fail.a = undefined;
    await p.execute(); // b was used last: a now, and it succeeds
    fail.a = () => httpError(503);
    const at = clock.now();
    await p.execute();
    await p.execute();
    expect(p.cooldowns().a! - at).toBe(5000);
  });

  it("calls in flight that fail together start one cooldown, not a streak", async () => {
    const clock = new VirtualClock();
    let release!: () => void;
    const down = new Promise<void>((r) => (release = r));
    const deps = ["a", "b"].map((name) => ({
      name,
      policy: policy({ clock, maxAttempts: 1, budget: false }),
      call: async () => {
        if (name === "a") {
          await down;
          throw httpError(503);
        }
        return name;
      },
    }));
    const p = pool(deps, { cooldownMs: 5000 });
    // Five calls: a, b, a, b, a (least recently used): three wait on a.
    const calls = Array.from({ length: 5 }, () => p.execute());
    release();
    await Promise.all(calls);
    expect(p.cooldowns().a).toBe(5000);
  });

  it("allowedFails: a deployment cools only after more failures than allowed", async () => {
    const { deps, fail, clock } = setup(["a", "b"]);
    const p = pool(deps, { allowedFails: 2 });
    fail.a = () => httpError(503);
    await p.execute();
    await p.execute(); // a (least recently used) fails again: 2 failures, as allowed
    expect(p.cooldowns().a).toBe(Number.NEGATIVE_INFINITY);
    await p.execute(); // the 3rd failure of a
    expect(p.cooldowns().a).toBe(clock.now() + 5000);
  });

  it("with every deployment cooling, a call waits for the first recovery if its deadline allows", async () => {
    const { deps, fail, clock, hits } = setup(["a", "b"]);
    const p = pool(deps, { cooldownMs: 3000, deadlineMs: 10_000 });
    let failures = 0;
    fail.a = () => (failures++ === 0 ? httpError(503) : undefined);
    fail.b = rateLimited(4);
    const r = await drive(clock, p.execute());
    expect(r).toEqual({ ok: true, value: "a" });
    expect(hits).toEqual(["a", "b", "a"]);
    expect(clock.now()).toBe(3000);
  });

  it("the wait for a recovery is told to the recovering deployment's onWait and booked in the ledger", async () => {
    const waits: [string, number, number][] = [];
    const { deps, fail, clock } = setup(["a"], {
      onWait: (e) => void waits.push([e.why, e.ms, e.attempt]),
    });
    const p = pool(deps, { cooldownMs: 3000, deadlineMs: 10_000 });
    let failures = 0;
    fail.a = () => (failures++ === 0 ? httpError(503) : undefined);
    const run = new Run({ clock });
    expect(await drive(clock, p.execute({ run }))).toEqual({ ok: true, value: "a" });
    const attempts = run.ledgers[0]!.attempts;
    expect(waits).toEqual([["cooldown", 3000, attempts[1]!.attempt]]);
    expect(attempts.map((a) => a.waitMs)).toEqual([0, 3000]); // booked on the attempt it held
    expect(run.ledgers[0]!.waitedMs).toBe(3000);
  });

  it("…and ends with pool-cooldown, the wait it would need and the last error, when it does not", async () => {
    const { deps, fail, clock, hits } = setup(["a", "b"]);
    const p = pool(deps, { cooldownMs: 30_000, deadlineMs: 10_000 });
    fail.a = () => httpError(503);
    fail.b = () => httpError(503);
    const e = await driveError(clock, p.execute());
    expect(e).toBeInstanceOf(BreakwaterError);
    expect(reasonOf(e)).toBe("pool-cooldown");
    expect((e as BreakwaterError).retryAfterMs).toBe(30_000);
    expect(((e as BreakwaterError).cause as { status: number }).status).toBe(503);
    expect((e as BreakwaterError).ledger?.attempts.map((a) => a.upstream)).toEqual(["a", "b"]);
    expect(hits).toEqual(["a", "b"]);
  });

  it("the wait for a recovery ends at once when the caller aborts", async () => {
    const { deps, fail, clock } = setup(["a"]);
    const p = pool(deps, { cooldownMs: 5000 });
    fail.a = () => httpError(503);
    await driveError(clock, p.execute()).catch(() => {});
    const ac = new AbortController();
    const waiting = p.execute({ signal: ac.signal });
    await clock.advance(100);
    ac.abort(new Error("user left"));
    await expect(waiting).rejects.toThrow("user left");
    expect(clock.pending).toBe(0);
  });

  it("a failure that does not move on (a bad request) reaches the caller and cools nothing", async () => {
    const { deps, fail, clock, hits } = setup(["a", "b"]);
    const p = pool(deps);
    fail.a = () => httpError(400);
    const e = await driveError(clock, p.execute());
    expect((e as { status: number }).status).toBe(400);
    expect(hits).toEqual(["a"]);
    expect(p.cooldowns().a).toBe(Number.NEGATIVE_INFINITY);
  });

  it("one call, one ledger and one attempt cap across deployments, counted on the run", async () => {
    const { deps, fail, clock } = setup(["a", "b", "c"]);
    const run = new Run({ clock });
    const p = pool(deps, { maxAttempts: 2 });
    fail.a = () => httpError(503);
    fail.b = () => httpError(503);
    const e = await driveError(clock, p.execute({ run }));
    expect((e as { status: number }).status).toBe(503);
    expect(run.stats.calls).toBe(1);
    expect(run.stats.attempts).toBe(2);
  });

  it("streams: a deployment that fails before any content hands the stream to the next", async () => {
    const clock = new VirtualClock();
    const mk = (name: string, ok: boolean) => ({
      name,
      policy: policy({ clock, maxAttempts: 1, budget: false }),
      open: async function* () {
        if (!ok) throw httpError(529);
        yield `${name}-1`;
        yield `${name}-2`;
      },
    });
    const p = pool<never, string>([mk("a", false), mk("b", true)]);
    const out: string[] = [];
    for await (const c of p.stream()) out.push(c);
    expect(out).toEqual(["b-1", "b-2"]);
    expect(p.cooldowns().a).toBe(5000);
  });

  it("names the option, the value and what is allowed", () => {
    const { deps } = setup(["a"]);
    expect(() => pool(deps, { allowedFails: -1 })).toThrow(/pool: option "allowedFails"/);
    expect(() => pool(deps, { cooldownMs: 10_000, maxCooldownMs: 1000 })).toThrow(
      /maxCooldownMs.*>= cooldownMs/,
    );
    expect(() => pool([])).toThrow(/upstreams/);
  });
});
