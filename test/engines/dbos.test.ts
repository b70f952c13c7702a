import { describe, expect, it } from "vitest";
import { dbosHarness } from "./fixtures/dbos-harness.ts";
import { complete } from "./fixtures/kills.ts";

// breakwater inside DBOS on a real Postgres (test/engines/fixtures/dbos-harness.ts): the agent
// loop killed once (at 20 points in the long tier's dbos.long.test.ts), and what DBOS is
// handed for each kind of verdict.
const { args, asked, once, killLoop, fault } = dbosHarness();

killLoop(1);

describe("breakwater/dbos: what DBOS is handed", () => {
  it("a context-length 400 is sent once, recorded, and not sent again when the workflow is asked again", async () => {
    const a = args("ask");
    fault().setScript({ rules: [{ model: a.model, status: 400, error: "context_length" }] });
    const r = await complete(once(a));
    expect(r.error?.reason).toBe("not-retryable");
    expect(asked(a.model).requests).toBe(1);
    const again = await complete(once(a)); // the same workflow id: DBOS's record answers
    expect(again.error?.reason).toBe("not-retryable");
    expect(asked(a.model).requests).toBe(1);
  }, 60_000);

  it("a 503 storm: breakwater's 3 attempts, then the workflow ends: 3 requests, DBOS retries none", async () => {
    const a = args("ask");
    fault().setScript({ rules: [{ model: a.model, status: 503 }] });
    const r = await complete(once(a));
    expect(r.error?.reason).toBe("attempts-exhausted");
    expect(asked(a.model).requests).toBe(3);
  }, 60_000);

  // The step holds 1 s here (5 s by default): the wait it hands on is as long, in less time.
  it("a 429 with Retry-After 3 s (past the 1 s the step holds) is a durable sleep: the process that met it dies, the next answers 3-14 s later", async () => {
    const a = { ...args("ask"), holdMs: 1_000 };
    fault().setScript({ rules: [{ model: a.model, status: 429, retryAfter: 3, times: 1 }] });
    const first = once(a);
    await first.started;
    for (let i = 0; i < 200 && asked(a.model).requests === 0; i++)
      await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500)); // inside the sleep, which holds nothing
    first.child.kill("SIGKILL");
    await first.exited;
    const r = await complete(once(a)); // DBOS recovers the workflow, its sleep resumed
    expect(r.answer).toBeDefined();
    const t = asked(a.model).t;
    expect(t.length).toBe(2);
    const gap = t[1]!.at - t[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(3_000);
    expect(gap).toBeLessThanOrEqual(14_000);
  }, 90_000);
});
