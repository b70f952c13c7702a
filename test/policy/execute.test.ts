import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/core/breaker.ts";
import { RetryBudget } from "../../src/core/budget.ts";
import { VirtualClock } from "../../src/core/clock.ts";
import { BreakwaterError, ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import { Run } from "../../src/run/run.ts";
import { drive, driveError, httpError } from "../helpers.ts";

/** An operation that throws each of `errors` in turn, then returns "ok". */
function flaky(errors: unknown[]) {
  const calls: { attempt: number; at: number }[] = [];
  const op = (clock: VirtualClock) => async (ctx: { attempt: number }) => {
    calls.push({ attempt: ctx.attempt, at: clock.now() });
    const e = errors[calls.length - 1];
    if (e !== undefined) throw e;
    return "ok";
  };
  return { calls, op };
}

describe("policy.execute", () => {
  it("succeeds after two 503s: 3 attempts, waits within the backoff bounds", async () => {
    const clock = new VirtualClock();
    const p = policy({ maxAttempts: 3, backoff: { baseMs: 500, capMs: 8_000 }, clock });
    const { calls, op } = flaky([httpError(503), httpError(503)]);
    const r = await drive(clock, p.execute(op(clock)));
    expect(r).toEqual({ ok: true, value: "ok" });
    expect(calls.map((c) => c.attempt)).toEqual([1, 2, 3]);
    const gap1 = calls[1]!.at - calls[0]!.at;
    const gap2 = calls[2]!.at - calls[1]!.at;
    expect(gap1).toBeGreaterThanOrEqual(0);
    expect(gap1).toBeLessThanOrEqual(500);
    expect(gap2).toBeLessThanOrEqual(1000);
  });

  it("records every attempt in the ledger, and reports events", async () => {
    const clock = new VirtualClock();
    const events: string[] = [];
    const p = policy({
      clock,
      random: () => 0.5,
      onRetry: (e) => void events.push(`retry ${e.attempt} ${e.failure.kind} ${e.delayMs}`),
      onSuccess: (e) => void events.push(`success ${e.attempts}`),
    });
    const { op } = flaky([httpError(500)]);
    let ledger: unknown;
    await drive(
      clock,
      p.execute(op(clock), {}).then((v) => {
        ledger = v;
      }),
    );
    expect(events).toEqual(["retry 1 server_error 250", "success 2"]);
    expect(ledger).toBe("ok");
  });

  const oneAttempt: [string, unknown, string, "own" | "provider"][] = [
    ["a 400", httpError(400), "not-retryable", "provider"],
    ["a 401", httpError(401), "not-retryable", "provider"],
    [
      "a quota-exhausted 429",
      httpError(429, { code: "insufficient_quota" }),
      "not-retryable",
      "provider",
    ],
    [
      "a context-length error",
      httpError(400, { code: "context_length_exceeded" }),
      "not-retryable",
      "provider",
    ],
    ["an unknown error", new Error("bug in request assembly"), "not-retryable", "provider"],
  ];
  it.each(oneAttempt)(
    "%s means exactly one attempt and the provider's own error",
    async (_, error, reason) => {
      const clock = new VirtualClock();
      const p = policy({ clock });
      const { calls, op } = flaky([error, error, error]);
      const thrown = await driveError(clock, p.execute(op(clock)));
      expect(calls).toHaveLength(1);
      expect(thrown).toBe(error);
      expect(reasonOf(thrown)).toBe(reason);
      expect(ledgerOf(thrown)?.attempts).toHaveLength(1);
    },
  );

  it("an aborted call makes one attempt and rejects with the abort reason", async () => {
    const clock = new VirtualClock();
    const ac = new AbortController();
    const p = policy({ clock });
    let calls = 0;
    const promise = p.execute(
      async ({ signal }) => {
        calls++;
        ac.abort(new DOMException("user left", "AbortError"));
        throw signal.reason;
      },
      { signal: ac.signal },
    );
    const thrown = await driveError(clock, promise);
    expect(calls).toBe(1);
    expect((thrown as Error).name).toBe("AbortError");
    expect(reasonOf(thrown)).toBe("cancelled");
  });

  it("an empty budget means one attempt and a BreakwaterError 'budget' with the cause", async () => {
    const clock = new VirtualClock();
    const budget = new RetryBudget({ maxTokens: 1 });
    budget.tryAcquire();
    const p = policy({ clock, budget });
    const err = httpError(503);
    const { calls, op } = flaky([err, err]);
    const thrown = await driveError(clock, p.execute(op(clock)));
    expect(calls).toHaveLength(1);
    expect(thrown).toBeInstanceOf(BreakwaterError);
    expect((thrown as BreakwaterError).reason).toBe("budget");
    expect((thrown as BreakwaterError).cause).toBe(err);
    expect(ledgerOf(thrown)?.attempts).toHaveLength(1);
  });

  it("an open breaker fails fast: no attempt, no budget spent", async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ consecutiveFailures: 1, clock });
    breaker.onFailure();
    const budget = new RetryBudget({ maxTokens: 5 });
    const p = policy({ clock, breaker, budget });
    const { calls, op } = flaky([]);
    const thrown = await driveError(clock, p.execute(op(clock)));
    expect(calls).toHaveLength(0);
    expect(reasonOf(thrown)).toBe("circuit-open");
    expect(budget.tokens).toBe(5);
  });

  it("a breaker that opens mid-call stops the retries", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 5, breaker: { consecutiveFailures: 2 } });
    const { calls, op } = flaky([httpError(503), httpError(503), httpError(503)]);
    const thrown = await driveError(clock, p.execute(op(clock)));
    expect(calls).toHaveLength(2);
    expect(reasonOf(thrown)).toBe("circuit-open");
  });

  it("a deadline too short for the next wait means one attempt and reason 'deadline'", async () => {
    const clock = new VirtualClock();
    const p = policy({
      clock,
      deadlineMs: 100,
      backoff: { baseMs: 1_000, capMs: 1_000, jitter: "none" },
    });
    const { calls, op } = flaky([httpError(503)]);
    const thrown = await driveError(clock, p.execute(op(clock)));
    expect(calls).toHaveLength(1);
    expect(reasonOf(thrown)).toBe("deadline");
    expect(clock.now()).toBe(0); // gave up without sleeping
  });

  it("attempts used up: the provider's own error, reason 'attempts-exhausted'", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 3 });
    const errs = [httpError(503), httpError(502), httpError(500)];
    const { calls, op } = flaky(errs);
    const thrown = await driveError(clock, p.execute(op(clock)));
    expect(calls).toHaveLength(3);
    expect(thrown).toBe(errs[2]);
    expect(reasonOf(thrown)).toBe("attempts-exhausted");
  });

  describe("Retry-After", () => {
    const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);
    it.each([
      ["retry-after-ms", { "retry-after-ms": "1500" }, 1_500],
      ["delay-seconds", { "retry-after": "3" }, 3_000],
      ["IMF-fixdate", { "retry-after": "Sun, 29 Nov 2026 12:00:04 GMT" }, 4_000],
      ["RFC 850", { "retry-after": "Sunday, 29-Nov-26 12:00:05 GMT" }, 5_000],
      ["asctime", { "retry-after": "Sun Nov 29 12:00:06 2026" }, 6_000],
    ])("honours %s: the next attempt never starts earlier", async (_, headers, ms) => {
      const clock = new VirtualClock(NOW);
      const p = policy({ clock, random: () => 0.999 });
      const { calls, op } = flaky([httpError(429, { headers: new Headers(headers) })]);
      await drive(clock, p.execute(op(clock)));
      const gap = calls[1]!.at - calls[0]!.at;
      expect(gap).toBeGreaterThanOrEqual(ms);
      expect(gap).toBeLessThanOrEqual(ms + Math.min(10_000, ms) + 1); // U(hint, 2·hint), extra ≤ 10 s
    });

    it("one over the cap gives up at once with the hint on the error", async () => {
      const clock = new VirtualClock(NOW);
      const p = policy({ clock, retryAfter: { maxMs: 10_000 } });
      const { calls, op } = flaky([httpError(429, { headers: { "retry-after": "86400" } })]);
      const thrown = (await driveError(clock, p.execute(op(clock)))) as BreakwaterError;
      expect(calls).toHaveLength(1);
      expect(thrown.reason).toBe("retry-after-too-long");
      expect(thrown.retryAfterMs).toBe(86_400_000);
      expect(clock.now()).toBe(NOW);
    });

    it("one past the deadline gives up at once with the hint", async () => {
      const clock = new VirtualClock(NOW);
      const p = policy({ clock, deadlineMs: 500 });
      const { calls, op } = flaky([httpError(503, { headers: { "retry-after": "1" } })]);
      const thrown = (await driveError(clock, p.execute(op(clock)))) as BreakwaterError;
      expect(calls).toHaveLength(1);
      expect(thrown.reason).toBe("deadline");
      expect(thrown.retryAfterMs).toBe(1_000);
      expect(clock.now()).toBe(NOW);
    });
  });

  it("abort during a backoff wait rejects without waiting the delay out", async () => {
    const clock = new VirtualClock();
    const ac = new AbortController();
    const p = policy({ clock, backoff: { baseMs: 60_000, capMs: 60_000, jitter: "none" } });
    const promise = p.execute(
      async () => {
        throw httpError(503);
      },
      { signal: ac.signal },
    );
    const settled = promise.catch((e) => e);
    await clock.advance(10);
    ac.abort(new DOMException("stop", "AbortError"));
    const thrown = await settled;
    expect(reasonOf(thrown)).toBe("cancelled");
    expect(clock.now()).toBe(10);
    expect(clock.pending).toBe(0);
  });

  it("an attempt timeout cuts a hung attempt and retries it", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, attemptTimeoutMs: 1_000, maxAttempts: 2 });
    let n = 0;
    const r = await drive(
      clock,
      p.execute(({ signal }) => {
        n++;
        if (n === 1) return new Promise<string>(() => {}); // ignores its signal entirely
        return signal.aborted ? "aborted" : "second";
      }),
    );
    expect(r).toEqual({ ok: true, value: "second" });
    expect(clock.pending).toBe(0);
  });

  it("timeouts on every attempt end with a BreakwaterError 'attempt-timeout'", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, attemptTimeoutMs: 100, maxAttempts: 2 });
    const thrown = await driveError(
      clock,
      p.execute(() => new Promise(() => {})),
    );
    expect(reasonOf(thrown)).toBe("attempt-timeout");
    expect(ledgerOf(thrown)?.attempts.map((a) => a.failure?.kind)).toEqual(["timeout", "timeout"]);
  });

  it("the attempt's signal aborts at the call deadline, reason 'deadline'", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, deadlineMs: 300, attemptTimeoutMs: 10_000 });
    let remaining = 0;
    const thrown = await driveError(
      clock,
      p.execute(({ signal, remainingMs }) => {
        remaining = remainingMs;
        return new Promise((_, reject) =>
          signal.addEventListener("abort", () => reject(signal.reason)),
        );
      }),
    );
    expect(remaining).toBe(300);
    expect(reasonOf(thrown)).toBe("deadline");
    expect(clock.now()).toBe(300);
  });

  it("onRetry can veto: the provider's error, reason 'vetoed', budget refunded", async () => {
    const clock = new VirtualClock();
    const budget = new RetryBudget({ maxTokens: 2 });
    const p = policy({ clock, budget, onRetry: () => false });
    const err = httpError(503);
    const thrown = await driveError(clock, p.execute(flaky([err]).op(clock)));
    expect(thrown).toBe(err);
    expect(reasonOf(thrown)).toBe("vetoed");
    expect(budget.tokens).toBe(2);
  });

  it("onGiveUp sees the reason and the ledger", async () => {
    const clock = new VirtualClock();
    const seen: string[] = [];
    const p = policy({
      clock,
      maxAttempts: 2,
      onGiveUp: (e) => void seen.push(`${e.reason}:${e.ledger.attempts.length}`),
    });
    await driveError(clock, p.execute(flaky([httpError(503), httpError(503)]).op(clock)));
    expect(seen).toEqual(["attempts-exhausted:2"]);
  });

  it("wraps a thrown non-object so the ledger is still reachable", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const thrown = await driveError(
      clock,
      p.execute(() => {
        throw "plain string";
      }),
    );
    expect(thrown).toBeInstanceOf(BreakwaterError);
    expect((thrown as BreakwaterError).cause).toBe("plain string");
    expect(ledgerOf(thrown)?.attempts).toHaveLength(1);
  });

  it("a long-lived caller signal collects no listeners over 10k calls and 1k streams", async () => {
    const ac = new AbortController();
    const p = policy({ attemptTimeoutMs: 10_000 });
    const warnings: unknown[] = [];
    const onWarning = (w: unknown) => warnings.push(w);
    process.on("warning", onWarning);
    for (let i = 0; i < 10_000; i++) await p.execute(async () => i, { signal: ac.signal });
    for (let i = 0; i < 1_000; i++) {
      for await (const _ of p.stream(
        async function* () {
          yield i;
        },
        { signal: ac.signal, idleTimeoutMs: 1_000 },
      ));
    }
    await new Promise((r) => setImmediate(r));
    process.off("warning", onWarning);
    expect(warnings).toEqual([]);
    const { EventEmitter } = await import("node:events");
    expect(EventEmitter.getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  it("calls each with a signal of their own, awaited in a loop that never waits on I/O, leave a listener on the last signal only", async () => {
    const { EventEmitter } = await import("node:events");
    const p = policy();
    const signals = Array.from({ length: 2_000 }, () => new AbortController().signal);
    // No turn of the event loop ends in between: only microtasks run.
    for (const signal of signals) await p.execute(async () => 1, { signal });
    const held = signals.filter((s) => EventEmitter.getEventListeners(s, "abort").length > 0);
    expect(held).toEqual([signals.at(-1)]);
    await new Promise((r) => setImmediate(r));
    expect(EventEmitter.getEventListeners(signals.at(-1)!, "abort")).toHaveLength(0);
  });

  describe("Run limits", () => {
    it("the run's attempts bind across several calls", async () => {
      const clock = new VirtualClock();
      const run = new Run({ maxAttempts: 4, clock });
      const p = policy({ clock, maxAttempts: 3 });
      const first = flaky([httpError(503), httpError(503)]);
      expect(await drive(clock, p.execute(first.op(clock), { run }))).toEqual({
        ok: true,
        value: "ok",
      });
      const second = flaky([httpError(503), httpError(503)]);
      const thrown = await driveError(clock, p.execute(second.op(clock), { run }));
      expect(second.calls).toHaveLength(1);
      expect(reasonOf(thrown)).toBe("run-attempts");
      expect(run.stats).toMatchObject({ calls: 2, attempts: 4, retries: 2 });
    });

    it("the run's deadline binds: each call gets a safe share of what is left", async () => {
      const clock = new VirtualClock();
      const run = new Run({ deadlineMs: 10_000, clock, callShare: 0.8 });
      const p = policy({ clock, attemptTimeoutMs: 60_000 });
      const budgets: number[] = [];
      const slow = ({ remainingMs }: { remainingMs: number }) => {
        budgets.push(remainingMs);
        return clock.sleep(1_000).then(() => "done");
      };
      await drive(clock, p.execute(slow, { run }));
      await drive(clock, p.execute(slow, { run }));
      expect(budgets).toEqual([8_000, 7_200]);
      await clock.advance(8_000);
      const thrown = await driveError(clock, p.execute(slow, { run }));
      expect(reasonOf(thrown)).toBe("run-deadline");
      expect((thrown as Error).message).toBe("the run's deadline has passed");
    });

    it("a call cut by its share of the run, with time left in the run, says so", async () => {
      const clock = new VirtualClock();
      const run = new Run({ deadlineMs: 2_000, clock, callShare: 0.8 });
      const p = policy({ clock });
      const slow = () => clock.sleep(5_000).then(() => "done");
      const thrown = await driveError(clock, p.execute(slow, { run }));
      expect(reasonOf(thrown)).toBe("run-deadline");
      expect((thrown as Error).message).toBe(
        "the call's share of the run's time ran out (400 ms of the run left; new Run({ callShare }) sets the share)",
      );
    });
  });

  it("validates options at construction, naming option, value and rule", () => {
    expect(() => policy({ maxAttempts: 0 })).toThrow(
      'policy: option "maxAttempts" must be an integer >= 1; got 0',
    );
    expect(() => policy({ maxAttempts: 2.5 })).toThrow(/"maxAttempts".*got 2.5/);
    expect(() => policy({ deadlineMs: -5 })).toThrow(
      /"deadlineMs" must be a finite number of milliseconds > 0; got -5/,
    );
    expect(() => policy({ attemptTimeoutMs: Number.NaN })).toThrow(/"attemptTimeoutMs"/);
    expect(() => policy({ retryAfter: { maxMs: -1 } })).toThrow(/"retryAfter.maxMs"/);
    expect(() => policy({ retryAfter: { max: 1 } as never })).toThrow(
      /"retryAfter.max" must be a known option/,
    );
    expect(() => policy({ onRetry: 5 as never })).toThrow(/"onRetry" must be a function; got 5/);
    expect(() => policy({ clock: {} as never })).toThrow(/"clock" must be a Clock/);
    expect(() => policy({ maxAtempts: 3 } as never)).toThrow(/"maxAtempts" must be a known option/);
    // Names from other libraries count differently here: the error says how.
    expect(() => policy({ retries: 2 } as never)).toThrow(/p-retry's retries: 2 is maxAttempts: 3/);
    expect(() => policy({ maxRetries: 2 } as never)).toThrow(/maxRetries: 2 is maxAttempts: 3/);
    expect(() => policy({ maxRetryAfter: 60_000 } as never)).toThrow(
      /"wait-max" waits the cap like ky/,
    );
    expect(() => policy({ retryAfter: { beyondMax: "cap" } as never })).toThrow(
      /"retryAfter.beyondMax" must be one of/,
    );
    expect(() => policy({ budget: { maxTokens: -1 } })).toThrow(/RetryBudget: option "maxTokens"/);
    expect(() => policy({ prices: { m: { inputPerMillion: -1, outputPerMillion: 1 } } })).toThrow(
      /"prices.m.inputPerMillion"/,
    );
    expect(Object.isFrozen(policy().options)).toBe(true);
  });

  it("property: no scheduled wait ends past the deadline", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20_000 }),
        fc.integer({ min: 1, max: 5_000 }),
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined }), {
          minLength: 8,
          maxLength: 8,
        }),
        async (deadlineMs, baseMs, maxAttempts, hints) => {
          const clock = new VirtualClock();
          const p = policy({
            clock,
            deadlineMs,
            maxAttempts,
            backoff: { baseMs, capMs: baseMs * 8 },
          });
          let i = 0;
          const starts: number[] = [];
          await drive(
            clock,
            p.execute(async () => {
              starts.push(clock.now());
              const h = hints[i++];
              throw httpError(
                503,
                h === undefined ? {} : { headers: { "retry-after": String(h) } },
              );
            }),
          );
          return starts.every((t) => t < deadlineMs) && clock.now() <= deadlineMs;
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("giving up before a later attempt", () => {
  it("keeps the provider's last error as the cause when the breaker opened during the wait", async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ consecutiveFailures: 100, clock });
    const err = httpError(503);
    const p = policy({
      clock,
      breaker,
      backoff: { baseMs: 1_000, capMs: 1_000, jitter: "none" },
      // other callers' failures open the shared breaker while this call waits
      onRetry: () =>
        void clock.schedule(500, () => {
          for (let i = 0; i < 100; i++) breaker.onFailure();
        }),
    });
    let attempts = 0;
    const promise = p.execute(async () => {
      attempts++;
      throw err;
    });
    const thrown = (await driveError(clock, promise)) as BreakwaterError;
    expect(thrown.reason).toBe("circuit-open");
    expect(thrown.cause).toBe(err);
    expect(thrown.failure?.kind).toBe("overloaded");
    expect(attempts).toBe(1);
    expect(clock.now()).toBe(1_000); // it waited, then the open breaker refused attempt 2
  });
});
