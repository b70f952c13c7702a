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

  describe("finish what was started (rule 23)", () => {
    /** A window with p ≈ 0.5 (a quarter accepted), a draw fixed at `r`. */
    async function halfRefusing(r: number) {
      const clock = new VirtualClock();
      const a = new AdaptiveAdmission({ clock, burst: 0, minRetriesPerSecond: 0, random: () => r });
      await feed(a, clock, 200, 0.25, 5_000);
      return a;
    }
    const started = { started: true };
    const fresh = { started: false };

    it("takes the refused share from runs not yet under way first", async () => {
      const a = await halfRefusing(0.6);
      const p = a.rejectProbability;
      expect(p).toBeGreaterThan(0.45);
      expect(p).toBeLessThan(0.55);
      // Half the asks from each kind (the mix is learned from the asks in the window): the
      // new runs' are all refused, since p·asks passes their share of them; the started
      // runs' only with what is left, (p − ½) / ½ ≈ 0.
      for (let i = 0; i < 10; i++) a.tryAcquire(overloaded, i % 2 ? fresh : started);
      const verdicts: boolean[] = [];
      for (let i = 0; i < 40; i++) {
        verdicts.push(a.tryAcquire(overloaded, fresh), a.tryAcquire(overloaded, started));
      }
      const freshOk = verdicts.filter((v, i) => i % 2 === 0 && v).length;
      const startedOk = verdicts.filter((v, i) => i % 2 === 1 && v).length;
      expect(freshOk).toBe(0);
      expect(startedOk).toBe(40);
    });

    it("refuses the same share of all it is asked as without the ranking", () =>
      fc.assert(
        fc.asyncProperty(
          fc.double({ min: 0.05, max: 0.45, noNaN: true }),
          fc.integer({ min: 1, max: 9 }),
          async (acceptShare, freshTenths) => {
            const clock = new VirtualClock();
            let draws = 0;
            // An even spread of draws, so the refused share is the probability's.
            const a = new AdaptiveAdmission({
              clock,
              burst: 0,
              minRetriesPerSecond: 0,
              random: () => (draws++ * 0.618033988749895) % 1,
            });
            await feed(a, clock, 400, acceptShare, 2_000);
            const p = a.rejectProbability;
            let refused = 0;
            const n = 1_000;
            for (let i = 0; i < n; i++)
              if (!a.tryAcquire(overloaded, { started: i % 10 >= freshTenths })) refused++;
            // Asked in proportion: the share refused is p's, within the draws' spread.
            expect(Math.abs(refused / n - p)).toBeLessThan(0.05);
          },
        ),
        { numRuns: 25 },
      ));

    it("a call with no run counts as under way: no ask, the policy's share", async () => {
      const a = await halfRefusing(0.6);
      expect(a.tryAcquire(overloaded)).toBe(a.tryAcquire(overloaded, started));
    });
  });
});
