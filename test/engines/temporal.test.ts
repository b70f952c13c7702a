import { ApplicationFailure } from "@temporalio/common";
import { MockActivityEnvironment } from "@temporalio/testing";
import { bundleWorkflowCode } from "@temporalio/worker";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/core/breaker.ts";
import { VirtualClock } from "../../src/core/clock.ts";
import { ConfigError } from "../../src/core/validate.ts";
import { activity, retryPolicy, step } from "../../src/engines/temporal.ts";
import { fallback } from "../../src/policy/fallback.ts";
import { type Policy, policy } from "../../src/policy/policy.ts";
import { withBreakwater } from "../../src/providers/openai.ts";
import { useFaultServer } from "../fault-fixture.ts";

// Temporal through its own test kit: the activity side runs for real (MockActivityEnvironment
// is the worker's activity runtime without a server); what the server then does with the
// failure (wait nextRetryDelay, then attempt n + 1) is Temporal's documented semantics,
// played here by running the next attempt by hand.

const fs = useFaultServer();
const MESSAGES = [{ role: "user" as const, content: "hi" }];

function setup(p: Policy) {
  const openai = withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
    policy: p,
  });
  const answer = activity(
    async ({ signal }, model: string) => {
      const r = await openai.chat.completions.create({ model, messages: MESSAGES }, { signal });
      return r.choices[0]?.message.content ?? "";
    },
    { policy: p },
  );
  return { openai, answer };
}

/** Runs one attempt of `fn` as Temporal would: what it returned or threw, and its last
 * heartbeat. */
async function attempt<T>(
  fn: () => Promise<T>,
  info: { attempt?: number; heartbeatDetails?: unknown } = {},
) {
  const env = new MockActivityEnvironment(info, { logger: quiet });
  let beat: unknown;
  env.on("heartbeat", (d: unknown) => {
    beat = d;
  });
  const t0 = Date.now();
  const out = await env.run(fn).then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  return { ...out, beat, ms: Date.now() - t0 };
}

const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

describe("breakwater/temporal: activities", () => {
  it("a 429 with Retry-After 20 s: the attempt ends at once with nextRetryDelay 20-30 s, the next answers", async () => {
    const clock = new VirtualClock(Date.now());
    const p = policy({ clock });
    const { answer } = setup(p);
    fs.script({ rules: [{ route: "openai", status: 429, retryAfter: 20, times: 1 }] });
    const first = await attempt(() => answer("m-1"));
    expect(first.ok).toBe(false);
    const f = (first as { error: ApplicationFailure }).error;
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f.nonRetryable).toBe(false);
    expect(f.type).toBe("deferred");
    expect(f.nextRetryDelay).toBeGreaterThanOrEqual(20_000);
    expect(f.nextRetryDelay).toBeLessThanOrEqual(30_000);
    expect(first.ms).toBeLessThan(5_000); // not held in the process
    expect(fs.requests()).toBe(1);
    expect(first.beat).toMatchObject({ breakwater: { spent: 1, legs: 1 } });
    // Temporal's timer, then attempt 2 with the last heartbeat's details.
    await clock.advance(Number(f.nextRetryDelay));
    const second = await attempt(() => answer("m-1"), {
      attempt: 2,
      heartbeatDetails: first.beat,
    });
    expect(second).toMatchObject({ ok: true });
    expect(fs.requests()).toBe(2);
  });

  it("a context-length 400 is sent once and ends non-retryable", async () => {
    const { answer } = setup(policy());
    fs.script({ rules: [{ route: "openai", status: 400, error: "context_length" }] });
    const r = await attempt(() => answer("m-2"));
    const f = (r as { error: ApplicationFailure }).error;
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f.nonRetryable).toBe(true);
    expect(f.type).toBe("not-retryable");
    expect(retryPolicy().nonRetryableErrorTypes).toContain(f.type);
    expect(fs.requests()).toBe(1);
  });

  it("a 503 storm: breakwater's 3 attempts in the activity, then non-retryable: 3 requests, not 3 × Temporal's", async () => {
    const { answer } = setup(policy({ backoff: { baseMs: 20 } }));
    fs.script({ rules: [{ route: "openai", status: 503 }] });
    let sent = 0;
    for (let n = 1; n <= 5; n++) {
      const r = await attempt(() => answer("m-3"), { attempt: n });
      if (!r.ok && (r.error as ApplicationFailure).nonRetryable) break;
      sent++;
    }
    expect(sent).toBe(0); // the first attempt was final
    expect(fs.requests()).toBe(3);
  });

  it("a later attempt sends only what the step has left, though the last heartbeat was lost", async () => {
    const { answer } = setup(policy({ backoff: { baseMs: 20 } }));
    fs.script({ rules: [{ route: "openai", status: 503 }] });
    // A worker died during attempt 1 and 2 (no heartbeat came): attempt 3 may send one.
    const r = await attempt(() => answer("m-4"), { attempt: 3 });
    expect((r as { error: ApplicationFailure }).error.nonRetryable).toBe(true);
    expect(fs.requests()).toBe(1);
  });

  it("an open breaker switches to the fallback inside the same activity", async () => {
    const openai = new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test", maxRetries: 0 });
    const breaker = new CircuitBreaker({ consecutiveFailures: 1, openMs: 60_000 });
    const primary = policy({ breaker });
    const second = policy();
    const ask = (model: string) => async () =>
      (await openai.chat.completions.create({ model, messages: MESSAGES })).choices[0]?.message
        .content;
    const chain = fallback([
      { name: "primary", policy: primary, call: ask("m-primary") },
      { name: "second", policy: second, call: ask("m-second") },
    ]);
    fs.script({ rules: [{ route: "openai", model: "m-primary", status: 500 }] });
    const r1 = await attempt(() => step(chain));
    expect(r1.ok).toBe(true); // the primary's 500 opened the breaker; the second answered
    expect(breaker.state).toBe("open");
    fs.server.resetStats();
    const r2 = await attempt(() => step(chain));
    expect(r2.ok).toBe(true);
    const models = fs.server.stats().timeline.map((a) => a.model);
    expect(models).toEqual(["m-second"]); // nothing sent to the open primary
  });

  it("derives the activity's RetryPolicy from breakwater's, and checks its options by name", async () => {
    expect(retryPolicy()).toMatchObject({ maximumAttempts: 3, maximumInterval: 30_000 });
    expect(retryPolicy().nonRetryableErrorTypes).not.toContain("deferred");
    expect(retryPolicy({ maxAttempts: 5, retryAfter: { maxMs: 60_000 } })).toMatchObject({
      maximumAttempts: 5,
      maximumInterval: 60_000,
    });
    expect(() => retryPolicy({ maxAttempts: 0 })).toThrow(ConfigError);
    expect(() => retryPolicy({ maxAttempts: 0 })).toThrow(/maxAttempts/);
    expect(() => retryPolicy({ attempts: 3 } as never)).toThrow(/"attempts"/);
    expect(() => activity(async () => 1, { holdMs: -1 })).toThrow(/holdMs/);
    await expect(step("nope" as never)).rejects.toThrow(/a function, or a fallback/);
  });

  it("the RetryPolicy is importable in workflow code: Temporal's own bundler takes it", async () => {
    const quietLogger = { ...quiet, log() {} };
    const { code } = await bundleWorkflowCode({
      workflowsPath: `${import.meta.dirname}/fixtures/temporal-workflows/workflows.ts`,
      logger: quietLogger as never,
    });
    expect(code).toContain("nonRetryableErrorTypes");
    expect(code).toContain("attempts-exhausted"); // breakwater's final reasons, listed
  }, 60_000);
});
