import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { backoff } from "../../src/core/backoff.ts";
import { decide, type RetryRules, type RetryState } from "../../src/core/decide.ts";
import { FAILURE_KINDS, type Failure, failure, KINDS } from "../../src/core/failure.ts";

const rules = (over: Partial<RetryRules> = {}): RetryRules => ({
  maxAttempts: 3,
  backoff: backoff({ baseMs: 500, capMs: 8_000 }),
  retryAfterMaxMs: 30_000,
  retryAfterJitterMs: 1_000,
  retryAfterBeyondMax: "give-up",
  random: () => 0.5,
  ...over,
});

const state = (over: Partial<RetryState> = {}): RetryState => ({
  attempt: 1,
  deadline: { at: Number.POSITIVE_INFINITY, by: "deadline" },
  previousDelayMs: 0,
  emitted: false,
  timedOutBy: undefined,
  callerRefused: false,
  runRefusal: undefined,
  ...over,
});

const overloaded = failure("overloaded", { status: 503 });

describe("decide: the retry decision as a pure function", () => {
  const cases: [string, Partial<RetryState>, Failure, Partial<RetryRules>, unknown][] = [
    [
      "a 503 on the first attempt: retry after the backoff",
      {},
      overloaded,
      {},
      { retry: true, delayMs: 250 },
    ],
    ["cancelled: never", {}, failure("cancelled"), {}, { retry: false, reason: "cancelled" }],
    [
      "output was shown: interrupted",
      { emitted: true },
      overloaded,
      {},
      { retry: false, reason: "stream-interrupted" },
    ],
    [
      "cut by the deadline's own timer",
      { timedOutBy: "deadline" },
      failure("timeout"),
      {},
      { retry: false, reason: "deadline" },
    ],
    [
      "cut by the run's deadline",
      { timedOutBy: "run-deadline" },
      failure("timeout"),
      {},
      { retry: false, reason: "run-deadline" },
    ],
    [
      "a 400: not retryable",
      {},
      failure("invalid_request", { status: 400 }),
      {},
      { retry: false, reason: "not-retryable" },
    ],
    [
      "the caller's retryIf said no",
      { callerRefused: true },
      overloaded,
      {},
      { retry: false, reason: "not-retryable" },
    ],
    [
      "the last attempt",
      { attempt: 3 },
      overloaded,
      {},
      { retry: false, reason: "attempts-exhausted" },
    ],
    [
      "the last attempt timed out",
      { attempt: 3, timedOutBy: "attempt" },
      failure("timeout"),
      {},
      { retry: false, reason: "attempt-timeout" },
    ],
    [
      "a hint within the cap: wait it, plus up to its length again (capped at jitterMs)",
      {},
      failure("rate_limited", { retryAfterMs: 2_000 }),
      {},
      { retry: true, delayMs: 2_500 },
    ],
    [
      "a hint over the cap: backpressure",
      {},
      failure("rate_limited", { retryAfterMs: 60_000 }),
      {},
      { retry: false, reason: "retry-after-too-long", retryAfterMs: 60_000 },
    ],
    [
      "a wait past the deadline",
      { deadline: { at: 100, by: "deadline" } },
      overloaded,
      {},
      { retry: false, reason: "deadline" },
    ],
    [
      "a hinted wait past the run's share",
      { deadline: { at: 1_000, by: "run-deadline" } },
      failure("rate_limited", { retryAfterMs: 2_000 }),
      {},
      { retry: false, reason: "run-deadline", retryAfterMs: 2_000 },
    ],
    [
      "the run refuses",
      { runRefusal: "run-tokens" },
      overloaded,
      {},
      { retry: false, reason: "run-tokens" },
    ],
  ];
  it.each(cases)("%s", (_, s, f, r, verdict) => {
    expect(decide(state(s), f, 0, rules(r))).toEqual(verdict);
  });

  const arbState = fc.record({
    attempt: fc.integer({ min: 1, max: 10 }),
    deadline: fc.record({
      at: fc.oneof(fc.constant(Number.POSITIVE_INFINITY), fc.integer({ min: 0, max: 100_000 })),
      by: fc.constantFrom("deadline" as const, "run-deadline" as const),
    }),
    previousDelayMs: fc.integer({ min: 0, max: 10_000 }),
    emitted: fc.boolean(),
    timedOutBy: fc.constantFrom(
      undefined,
      "attempt" as const,
      "deadline" as const,
      "idle" as const,
    ),
    callerRefused: fc.boolean(),
    runRefusal: fc.constantFrom(undefined, "run-attempts" as const),
  });
  const arbFailure = fc
    .record({
      kind: fc.constantFrom(...FAILURE_KINDS),
      retryAfterMs: fc.option(fc.integer({ min: 0, max: 120_000 }), { nil: undefined }),
    })
    .map(({ kind, retryAfterMs }) => failure(kind, { retryAfterMs }));
  // Hostile random sources: out of range and NaN must not move a wait out of its bounds.
  const arbRandom = fc.oneof(
    fc.double({ min: 0, max: 0.999_999 }),
    fc.constantFrom(-3, 1, 7, Number.NaN),
  );

  it("retries only what may be retried, never before the hint, never past the deadline", () => {
    fc.assert(
      fc.property(
        arbState,
        arbFailure,
        fc.integer({ min: 0, max: 50_000 }),
        arbRandom,
        (s, f, now, r) => {
          const v = decide(s, f, now, rules({ random: () => r }));
          if (!v.retry) return;
          expect(KINDS[f.kind].retryable).toBe(true);
          expect(s.emitted || s.callerRefused || s.runRefusal !== undefined).toBe(false);
          expect(s.attempt).toBeLessThan(3);
          expect(now + v.delayMs).toBeLessThan(s.deadline.at);
          if (f.retryAfterMs !== undefined) {
            expect(v.delayMs).toBeGreaterThanOrEqual(f.retryAfterMs);
            expect(v.delayMs).toBeLessThanOrEqual(f.retryAfterMs * 2);
          } else {
            expect(v.delayMs).toBeGreaterThanOrEqual(0);
            expect(v.delayMs).toBeLessThanOrEqual(8_000);
          }
        },
      ),
    );
  });

  it("is a function of its inputs: the same inputs give the same verdict, and nothing is changed", () => {
    fc.assert(
      fc.property(arbState, arbFailure, fc.integer({ min: 0, max: 50_000 }), (s, f, now) => {
        const frozen = Object.freeze({ ...s, deadline: Object.freeze({ ...s.deadline }) });
        const a = decide(frozen, Object.freeze(f), now, rules());
        const b = decide(frozen, Object.freeze(f), now, rules());
        expect(a).toEqual(b);
      }),
    );
  });

  it("a custom backoff returning NaN, a negative or a huge value still yields a bounded wait", () => {
    for (const bad of [Number.NaN, -5, Number.POSITIVE_INFINITY]) {
      const v = decide(state(), overloaded, 0, rules({ backoff: { delay: () => bad } }));
      if (v.retry) {
        expect(v.delayMs).toBeGreaterThanOrEqual(0);
        expect(Number.isFinite(v.delayMs)).toBe(true);
      }
    }
  });

  it("a hint beyond the cap: backpressure by default; 'wait-max' waits the cap and retries", () => {
    const f = failure("rate_limited", { retryAfterMs: 120_000 });
    expect(decide(state(), f, 0, rules())).toEqual({
      retry: false,
      reason: "retry-after-too-long",
      retryAfterMs: 120_000,
    });
    const v = decide(
      state(),
      f,
      0,
      rules({ retryAfterBeyondMax: "wait-max", retryAfterJitterMs: 0 }),
    );
    expect(v).toEqual({ retry: true, delayMs: 30_000 });
  });
});

describe("a Retry-After wait never exceeds retryAfter.maxMs (the spread is capped too)", () => {
  it("a 29 s hint under a 30 s cap waits between 29 and 30 s, whatever the draw", () => {
    const f = failure("rate_limited", { retryAfterMs: 29_000 });
    const r = rules({ retryAfterMaxMs: 30_000, retryAfterJitterMs: 10_000 });
    for (const draw of [0, 0.2, 0.5, 0.999]) {
      const v = decide(state(), f, 0, { ...r, random: () => draw });
      expect(v.retry).toBe(true);
      const ms = (v as { delayMs: number }).delayMs;
      expect(ms).toBeGreaterThanOrEqual(29_000);
      expect(ms).toBeLessThanOrEqual(30_000);
    }
  });

  it("property: hint <= wait <= max(hint, maxMs) for every hint within the cap", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60_000 }),
        fc.integer({ min: 0, max: 60_000 }),
        fc.integer({ min: 0, max: 20_000 }),
        fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
        (hint, maxMs, jitterMs, draw) => {
          fc.pre(hint <= maxMs);
          const f = failure("rate_limited", { retryAfterMs: hint });
          const r = rules({
            retryAfterMaxMs: maxMs,
            retryAfterJitterMs: jitterMs,
            random: () => draw,
          });
          const v = decide(state(), f, 0, r);
          expect(v.retry).toBe(true);
          const ms = (v as { delayMs: number }).delayMs;
          expect(ms).toBeGreaterThanOrEqual(hint);
          expect(ms).toBeLessThanOrEqual(maxMs);
        },
      ),
    );
  });
});

describe("decide: an unsafe request (rule 20)", () => {
  const unsafe = state({ unsafe: true });
  it.each([
    ["a 503: turned away, retried", failure("overloaded", { status: 503 }), true],
    ["a 429: retried", failure("rate_limited", { status: 429 }), true],
    ["a 529: retried", failure("overloaded", { status: 529 }), true],
    ["connection refused: retried", failure("transport", { code: "ECONNREFUSED" }), true],
    ["connect timeout: retried", failure("timeout", { code: "UND_ERR_CONNECT_TIMEOUT" }), true],
    ["a 500: outcome unknown", failure("server_error", { status: 500 }), "outcome-unknown"],
    ["a 504: outcome unknown", failure("timeout", { status: 504 }), "outcome-unknown"],
    [
      "our timeout: outcome unknown",
      failure("timeout", { code: "attempt_timeout" }),
      "outcome-unknown",
    ],
    ["a reset: outcome unknown", failure("transport", { code: "ECONNRESET" }), "outcome-unknown"],
    ["an invalid answer: it arrived", failure("invalid_output"), "not-retryable"],
    [
      "a 400: not retryable either way",
      failure("invalid_request", { status: 400 }),
      "not-retryable",
    ],
  ] as const)("%s", (_, f, expected) => {
    const v = decide(unsafe, f, 0, rules());
    if (expected === true) expect(v.retry).toBe(true);
    else expect(v).toEqual({ retry: false, reason: expected });
    expect(decide(state(), f, 0, rules()).retry).toBe(KINDS[f.kind].retryable); // safe: as before
  });

  it("the deadline's timer on an unsafe request: outcome unknown, not deadline", () => {
    const v = decide(
      state({ unsafe: true, timedOutBy: "deadline" }),
      failure("timeout"),
      0,
      rules(),
    );
    expect(v).toEqual({ retry: false, reason: "outcome-unknown" });
  });

  it("property: an unsafe request is retried only when the failure proves it never arrived", () => {
    const f = fc.record({
      kind: fc.constantFrom(...FAILURE_KINDS),
      status: fc.option(fc.integer({ min: 400, max: 599 }), { nil: undefined }),
      code: fc.option(fc.constantFrom("ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EAI_AGAIN"), {
        nil: undefined,
      }),
    });
    fc.assert(
      fc.property(f, fc.integer({ min: 1, max: 5 }), (x, attempt) => {
        const fl = failure(x.kind, { status: x.status, code: x.code });
        const v = decide(state({ unsafe: true, attempt }), fl, 0, rules({ maxAttempts: 9 }));
        const proof =
          x.status !== undefined
            ? [429, 503, 529].includes(x.status)
            : x.code === "ECONNREFUSED" || x.code === "EAI_AGAIN";
        if (v.retry) expect(proof && fl.retryable).toBe(true);
        if (!v.retry && fl.retryable && !proof)
          expect(v.reason).toMatch(/outcome-unknown|not-retryable/);
      }),
      { numRuns: 500 },
    );
  });
});
