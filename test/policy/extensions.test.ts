import { describe, expect, it } from "vitest";
import * as breakwater from "../../src/index.ts";
import {
  type Admission,
  type Backoff,
  type Breaker,
  type BreakerState,
  CircuitBreaker,
  type Failure,
  policy,
  RetryBudget,
  Run,
  reasonOf,
  VirtualClock,
} from "../../src/index.ts";
import { drive, driveError, httpError } from "../helpers.ts";

/** Fails with each error in turn, then answers "ok". */
const flaky = (errors: unknown[]) => {
  let n = 0;
  return async () => {
    const e = errors[n++];
    if (e !== undefined) throw e;
    return "ok";
  };
};

describe("extension points: a user's own admission, breaker and backoff", () => {
  it("honours a custom Admission: asked before each retry, told every outcome", async () => {
    const clock = new VirtualClock();
    const log: string[] = [];
    let grant = true;
    const admission: Admission = {
      tryAcquire: () => {
        log.push(`ask:${grant}`);
        return grant;
      },
      onSuccess: () => void log.push("success"),
      onFailure: (f: Failure) => void log.push(`failure:${f.kind}`),
      refund: () => void log.push("refund"),
    };
    // `admission` is `budget` by its other name: the same gate either way.
    const p = policy({ clock, admission });
    expect(await drive(clock, p.execute(flaky([httpError(503)])))).toEqual({
      ok: true,
      value: "ok",
    });
    expect(log).toEqual(["failure:overloaded", "ask:true", "success"]);

    log.length = 0;
    grant = false;
    const e = await driveError(clock, p.execute(flaky([httpError(503)])));
    expect(reasonOf(e)).toBe("budget");
    expect(log).toEqual(["failure:overloaded", "ask:false"]);

    log.length = 0;
    grant = true;
    const vetoed = policy({ clock, budget: admission, onRetry: () => false });
    await driveError(clock, vetoed.execute(flaky([httpError(503)])));
    expect(log).toEqual(["failure:overloaded", "ask:true", "refund"]);
  });

  it("honours a custom Breaker: one verdict per granted attempt, open refuses", async () => {
    const clock = new VirtualClock();
    const log: string[] = [];
    let state: BreakerState = "closed";
    const breaker: Breaker = {
      tryAcquire: () => state !== "open",
      onSuccess: () => void log.push("success"),
      onFailure: () => void log.push("failure"),
      onNeutral: () => void log.push("neutral"),
      get state() {
        return state;
      },
    };
    const p = policy({ clock, breaker });
    await drive(clock, p.execute(flaky([httpError(503)])));
    await driveError(clock, p.execute(flaky([httpError(400)])));
    expect(log).toEqual(["failure", "success", "neutral"]);
    state = "open";
    let ran = false;
    const e = await driveError(
      clock,
      p.execute(async () => {
        ran = true;
      }),
    );
    expect(reasonOf(e)).toBe("circuit-open");
    expect(ran).toBe(false);
  });

  it("runs a Backoff that is only a delay() and passes it the retry number and kind", async () => {
    const clock = new VirtualClock();
    const asked: string[] = [];
    const mine: Backoff = {
      delay: (n, kind) => {
        asked.push(`${n}:${kind}`);
        return 1_000 * n;
      },
    };
    const p = policy({ clock, backoff: mine });
    const t0 = clock.now();
    await drive(clock, p.execute(flaky([httpError(503), httpError(500)])));
    expect(asked).toEqual(["1:overloaded", "2:server_error"]);
    expect(clock.now() - t0).toBe(3_000);
  });

  it("a breaker's state survives a restart through toJSON and initialState", () => {
    const clock = new VirtualClock(1_000);
    const a = new CircuitBreaker({ clock, consecutiveFailures: 2, openMs: 5_000 });
    a.onFailure();
    a.onFailure();
    expect(a.state).toBe("open");
    const saved = JSON.parse(JSON.stringify(a));
    const b = new CircuitBreaker({
      clock,
      consecutiveFailures: 2,
      openMs: 5_000,
      initialState: saved,
    });
    expect(b.state).toBe("open");
    expect(b.tryAcquire()).toBe(false);
    const c = new CircuitBreaker({
      clock,
      consecutiveFailures: 2,
      initialState: { ...saved, state: "closed", streak: 1 },
    });
    c.onFailure();
    expect(c.state).toBe("open"); // the streak carried over
    expect(
      new CircuitBreaker({ clock, initialState: { state: "bogus", slots: "x" } as never }).state,
    ).toBe("closed");
  });

  it("a budget's level survives a restart through toJSON and restore, clamped", () => {
    const a = new RetryBudget({ maxTokens: 10 });
    for (let i = 0; i < 7; i++) a.tryAcquire();
    const b = new RetryBudget({ maxTokens: 10 }).restore(JSON.parse(JSON.stringify(a)));
    expect(b.tokens).toBe(3);
    expect(new RetryBudget({ maxTokens: 10 }).restore({ tokens: 99 }).tokens).toBe(10);
    expect(new RetryBudget({ maxTokens: 10 }).restore({ tokens: -1 }).tokens).toBe(0);
  });

  it("a broken extension object is refused at construction, naming the option", () => {
    expect(() => policy({ budget: "x" as never })).toThrow(/"budget" must be an Admission/);
    expect(() => policy({ admission: "x" as never })).toThrow(/"admission" must be an Admission/);
    expect(() => policy({ budget: false, admission: false })).toThrow(
      /"admission" must be one of budget and admission \(the same option\), not both/,
    );
    expect(() => policy({ breaker: 5 as never })).toThrow(/"breaker" must be a Breaker/);
    expect(() => policy({ backoff: "x" as never })).toThrow(/option "backoff" must be a Backoff/);
    expect(() => policy({ backoff: { baseMs: -1 } })).toThrow(/option "backoff.baseMs"/);
  });

  it("null is a bad value, not a default", () => {
    expect(() => policy({ maxAttempts: null as never })).toThrow(
      /"maxAttempts" must be an integer/,
    );
    expect(() => policy({ clock: null as never })).toThrow(/"clock" must be a Clock/);
    expect(() => policy({ backoff: null as never })).toThrow(/"backoff"/);
    expect(() => new Run({ deadlineMs: null as never })).toThrow(/"deadlineMs"/);
  });
});

describe("Run keeps its levers inside", () => {
  it("the package exports no run internals, and a Run shows caps, stats and ledgers only", () => {
    for (const name of ["RunLimits", "ToolMemo", "partsOf", "registerRun", "decide", "Call"])
      expect(Object.keys(breakwater)).not.toContain(name);
    const run = new Run();
    for (const name of [
      "addCall",
      "addAttempt",
      "rememberToolFailure",
      "recallToolFailure",
      "refuseAttempt",
    ])
      expect(name in run).toBe(false);
  });

  it("stats is a copy: writing to it changes nothing the run enforces", async () => {
    const clock = new VirtualClock();
    const run = new Run({ clock, maxAttempts: 1 });
    run.stats.attempts = -100;
    const p = policy({ clock });
    await drive(
      clock,
      p.execute(async () => "ok", { run }),
    );
    const e = await driveError(
      clock,
      p.execute(async () => "ok", { run }),
    );
    expect(reasonOf(e)).toBe("run-attempts");
    expect(run.stats.attempts).toBe(1);
  });

  it("execute rejects (not throws) a bad call option, naming it", async () => {
    const p = policy();
    await expect(p.execute(async () => 1, { run: {} as never })).rejects.toThrow(
      /"run" must be a Run/,
    );
    await expect(p.execute(async () => 1, { retryif: () => true } as never)).rejects.toThrow(
      /"retryif" must be a known option/,
    );
    await expect(p.execute("no" as never)).rejects.toThrow(/"operation" must be a function/);
  });
});
