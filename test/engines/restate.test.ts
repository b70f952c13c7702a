import { describe, expect, it } from "vitest";
import { restateHarness } from "./fixtures/restate-harness.ts";

// breakwater inside Restate, on the real server from npm (test/engines/fixtures/restate-harness.ts):
// the agent loop killed once (at 20 points in the long tier's restate.long.test.ts), and what
// Restate is handed for each kind of verdict.
const { send, output, asked, killService, killLoops, fault, next } = restateHarness();

killLoops(1);

describe("breakwater/restate: what Restate is handed", () => {
  it("a context-length 400 is sent once, a TerminalError naming the reason; asked again, the journal answers", async () => {
    const i = next();
    const model = `m-ctx-${i}`;
    fault().setScript({ rules: [{ model, status: 400, error: "context_length" }] });
    const id = await send("ask", { model }, `ctx-${i}`);
    const end = await output(id, true);
    expect(end?.error?.metadata?.["breakwater.reason"]).toBe("not-retryable");
    expect(end?.error?.message).toMatch(/context length/);
    expect(asked(model).requests).toBe(1);
    expect(await send("ask", { model }, `ctx-${i}`)).toBe(id); // the same invocation
    expect((await output(id, true))?.error).toBeDefined();
    expect(asked(model).requests).toBe(1);
  }, 60_000);

  it("a 503 storm: breakwater's 3 attempts, then a TerminalError: 3 requests, Restate retries none", async () => {
    const i = next();
    const model = `m-503-${i}`;
    fault().setScript({ rules: [{ model, status: 503 }] });
    const end = await output(await send("ask", { model }, `s-${i}`), true);
    expect(end?.error?.metadata?.["breakwater.reason"]).toBe("attempts-exhausted");
    expect(asked(model).requests).toBe(3);
  }, 60_000);

  // These steps hold 1 s (5 s by default): the wait they hand on is as long, in less time.
  it("a 429 with Retry-After 3 s (past the 1 s the step holds) is a ctx.sleep: the service dies during it, the next answers 3-14 s later", async () => {
    const i = next();
    const model = `m-429-${i}`;
    fault().setScript({ rules: [{ model, status: 429, retryAfter: 3, times: 1 }] });
    const id = await send("ask", { model, holdMs: 1_000 }, `ra-${i}`);
    for (let i = 0; i < 200 && asked(model).requests === 0; i++)
      await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500)); // inside the sleep: the process holds nothing
    await killService();
    const end = await output(id, true);
    expect(end?.answer).toBeDefined();
    const t = asked(model).t;
    expect(t.length).toBe(2);
    const gap = t[1]!.at - t[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(3_000);
    expect(gap).toBeLessThanOrEqual(14_000);
  }, 90_000);

  it("durableCalls streams live, records the parts, and a replay answers from the journal", async () => {
    const i = next();
    const model = `m-stream-${i}`;
    fault().setScript({ rules: [{ model, status: 503, times: 1 }] });
    const id = await send("aiStream", { model }, `st-${i}`);
    const end = await output(id, true);
    expect(((end?.answer ?? []) as unknown as string[]).join("")).toBe(
      "The fault server says hello, one word at a time.",
    );
    expect(asked(model).requests).toBe(2); // the 503 before content retried in the step
    expect(await send("aiStream", { model }, `st-${i}`)).toBe(id);
    expect(asked(model).requests).toBe(2);
  }, 60_000);

  it("durableCalls hands a Retry-After past the step's hold to a ctx.sleep, through the AI SDK's error class", async () => {
    const i = next();
    const model = `m-ra-stream-${i}`;
    fault().setScript({ rules: [{ model, status: 429, retryAfter: 2, times: 1 }] });
    const end = await output(await send("aiStream", { model, holdMs: 1_000 }, `rs-${i}`), true);
    expect(((end?.answer ?? []) as unknown as string[]).join("")).toMatch(/^The fault server/);
    const t = asked(model).t;
    expect(t.length).toBe(2);
    expect(t[1]!.at - t[0]!.at).toBeGreaterThanOrEqual(2_000);
  }, 60_000);

  it("an open breaker switches to the fallback inside the step", async () => {
    const i = next();
    const model = `m-down-${i}`;
    const second = `m-up-${i}`;
    fault().setScript({ rules: [{ model, status: 500 }] });
    const first = await output(await send("ask", { model, fallback: second }, `b1-${i}`), true);
    expect(first?.answer).toBeDefined(); // the 500 opened the primary's breaker; the second answered
    const before = asked(model).requests;
    const again = await output(await send("ask", { model, fallback: second }, `b2-${i}`), true);
    expect(again?.answer).toBeDefined();
    expect(asked(model).requests).toBe(before); // nothing sent to the open primary
    expect(asked(second).requests).toBe(2);
  }, 60_000);
});
