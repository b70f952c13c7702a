import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AdaptiveAdmission } from "../../src/core/admission.ts";
import { VirtualClock } from "../../src/core/clock.ts";
import { failure } from "../../src/core/failure.ts";

const overloaded = failure("overloaded", { status: 503 });
const badRequest = failure("invalid_request", { status: 400 });

/** Feeds `n` outcomes, a share `accepted` of them accepted, spread over `ms`. */
async function feed(
  a: AdaptiveAdmission,
  clock: VirtualClock,
  n: number,
  accepted: number,
  ms = 1_000,
) {
  for (let i = 0; i < n; i++) {
    if (i < n * accepted) a.onSuccess();
    else a.onFailure(overloaded);
    await clock.advance(ms / n);
  }
}

describe("AdaptiveAdmission (client-side adaptive throttling, k = 2)", () => {
  it("refuses with p = max(0, (attempts − k·accepts) / (attempts + 1))", async () => {
    const clock = new VirtualClock();
    const a = new AdaptiveAdmission({ clock, burst: 0 });
    expect(a.rejectProbability).toBe(0);
    await feed(a, clock, 100, 0.5);
    expect(a.rejectProbability).toBe(0); // half accepted: k = 2 leaves room for retries
    await feed(a, clock, 100, 0.25);
    const { attempts, accepts } = a.stats;
    expect(attempts).toBe(200);
    expect(a.rejectProbability).toBeCloseTo((attempts - 2 * accepts) / (attempts + 1), 10);
    expect(a.rejectProbability).toBeGreaterThan(0.2);
  });

  it("counts a definitive 4xx as accepted and a cancellation as nothing", () => {
    const clock = new VirtualClock();
    const a = new AdaptiveAdmission({ clock });
    a.onFailure(badRequest);
    a.onFailure(failure("cancelled"));
    expect(a.stats).toEqual({ attempts: 1, accepts: 1 });
  });

  it("admits a retry the server scheduled, whatever the ratio", async () => {
    const clock = new VirtualClock();
    const a = new AdaptiveAdmission({ clock, burst: 0, random: () => 0 });
    await feed(a, clock, 50, 0);
    expect(a.tryAcquire(overloaded)).toBe(false);
    expect(a.tryAcquire(failure("rate_limited", { retryAfterMs: 2_000 }))).toBe(true);
  });

  it("keeps a floor: a burst, then minRetriesPerSecond", async () => {
    const clock = new VirtualClock();
    const a = new AdaptiveAdmission({
      clock,
      burst: 3,
      minRetriesPerSecond: 2,
      random: () => 0,
    });
    await feed(a, clock, 50, 0);
    const granted = () =>
      Array.from({ length: 10 }, () => a.tryAcquire(overloaded)).filter(Boolean).length;
    expect(granted()).toBe(3);
    await clock.advance(1_000);
    expect(granted()).toBe(2);
  });

  it("no starvation: a recovered upstream is admitted again within one window", async () => {
    const clock = new VirtualClock();
    const a = new AdaptiveAdmission({ clock, windowMs: 10_000, burst: 0 });
    await feed(a, clock, 200, 0, 10_000);
    expect(a.rejectProbability).toBeGreaterThan(0.99);
    await feed(a, clock, 200, 1, 10_000); // it answers again
    expect(a.rejectProbability).toBe(0);
  });

  it("property: p lies in [0, 1) and follows the accept ratio; grants never exceed the floor when p is 1", () => {
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { minLength: 0, maxLength: 300 }),
        fc.double({ min: 1, max: 10, noNaN: true }),
        (outcomes, k) => {
          const clock = new VirtualClock();
          const a = new AdaptiveAdmission({
            clock,
            k,
            burst: 0,
            minRetriesPerSecond: 0,
            random: () => 0.5,
          });
          for (const ok of outcomes) {
            if (ok) a.onSuccess();
            else a.onFailure(overloaded);
          }
          const p = a.rejectProbability;
          expect(p).toBeGreaterThanOrEqual(0);
          expect(p).toBeLessThan(1);
          const accepts = outcomes.filter(Boolean).length;
          expect(p).toBeCloseTo(
            Math.max(0, (outcomes.length - k * accepts) / (outcomes.length + 1)),
            10,
          );
          // Admission follows p (random 0.5): admitted exactly when p <= 0.5.
          expect(a.tryAcquire(overloaded)).toBe(p <= 0.5);
        },
      ),
    );
  });

  it("validates its options, naming them", () => {
    expect(() => new AdaptiveAdmission({ k: 0 })).toThrow(
      /"k" must be a number from 1 to 100; got 0/,
    );
    expect(() => new AdaptiveAdmission({ windowMs: -1 })).toThrow(/"windowMs"/);
    expect(() => new AdaptiveAdmission({ burst: null as never })).toThrow(/"burst"/);
    expect(() => new AdaptiveAdmission({ kk: 2 } as never)).toThrow(/"kk" must be a known option/);
  });
});
