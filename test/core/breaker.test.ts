import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/core/breaker.ts";
import { VirtualClock } from "../../src/core/clock.ts";

describe("CircuitBreaker", () => {
  it("opens after consecutive failures, fails fast, then lets one probe through", async () => {
    const clock = new VirtualClock();
    const states: string[] = [];
    const b = new CircuitBreaker({
      consecutiveFailures: 3,
      openMs: 1_000,
      clock,
      onStateChange: (s) => states.push(s),
    });
    for (let i = 0; i < 3; i++) {
      expect(b.tryAcquire()).toBe(true);
      b.onFailure();
    }
    expect(b.state).toBe("open");
    expect(b.tryAcquire()).toBe(false);
    await clock.advance(1_000);
    expect(b.state).toBe("half-open");
    expect(b.tryAcquire()).toBe(true);
    expect(b.tryAcquire()).toBe(false); // one probe at a time
    b.onSuccess();
    expect(b.state).toBe("closed");
    expect(states).toEqual(["open", "half-open", "closed"]);
  });

  it("a failed probe opens it again", async () => {
    const clock = new VirtualClock();
    const b = new CircuitBreaker({ consecutiveFailures: 1, openMs: 500, clock });
    b.onFailure();
    await clock.advance(500);
    expect(b.tryAcquire()).toBe(true);
    b.onFailure();
    expect(b.state).toBe("open");
    await clock.advance(499);
    expect(b.tryAcquire()).toBe(false);
  });

  it("opens on the failure ratio over the window once throughput is reached", () => {
    const clock = new VirtualClock();
    const b = new CircuitBreaker({
      consecutiveFailures: 1000,
      failureRatio: 0.5,
      minimumThroughput: 10,
      clock,
    });
    for (let i = 0; i < 4; i++) {
      b.onSuccess();
      b.onFailure();
    }
    expect(b.state).toBe("closed"); // 8 outcomes: below the minimum
    b.onSuccess();
    b.onFailure();
    expect(b.state).toBe("open"); // 10 outcomes, 50% failed
  });

  it("forgets outcomes older than the window", async () => {
    const clock = new VirtualClock();
    const b = new CircuitBreaker({
      consecutiveFailures: 1000,
      failureRatio: 0.5,
      minimumThroughput: 4,
      windowMs: 10_000,
      clock,
    });
    b.onFailure();
    b.onFailure();
    b.onFailure();
    await clock.advance(20_000);
    b.onSuccess();
    b.onFailure();
    expect(b.state).toBe("closed");
  });

  it("a neutral outcome frees a probe without closing", async () => {
    const clock = new VirtualClock();
    const b = new CircuitBreaker({ consecutiveFailures: 1, openMs: 10, clock });
    b.onFailure();
    await clock.advance(10);
    expect(b.tryAcquire()).toBe(true);
    b.onNeutral();
    expect(b.state).toBe("half-open");
    expect(b.tryAcquire()).toBe(true);
  });

  it("validates its options", () => {
    expect(() => new CircuitBreaker({ failureRatio: 2 })).toThrow(
      /"failureRatio" must be a number from 0.001 to 1; got 2/,
    );
    expect(() => new CircuitBreaker({ openMs: 0 })).toThrow(/"openMs"/);
  });
});
