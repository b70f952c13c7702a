import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";
import { mulberry32 } from "../../src/testing/random.ts";
import { freePort } from "../fixtures/ports.ts";
import { startRestate, type TestRestate } from "../fixtures/restate.ts";
import { service, type Worker, warmWorkers } from "../run/fixtures/workers.ts";

// breakwater inside Restate (docs/architecture.md, rule 22), on the real server from npm:
// each model and tool call a `run` of breakwater's (ctx.run legs), a long wait a ctx.sleep,
// a final failure a TerminalError. The service process is killed with SIGKILL and started
// again; the server drives the invocation to its end.
const SERVICE = join(import.meta.dirname, "fixtures", "restate-service.ts");
const dir = mkdtempSync(join(tmpdir(), "bw-restate-"));
let fault: FaultServer;
let rs: TestRestate;
let port: number;
let workers: ReturnType<typeof warmWorkers>;
let live: Worker;
let n = 0;

/** Starts the next service process on the registered port. */
async function startService(): Promise<void> {
  live = workers.take({ port, fault: fault.url });
  await live.started;
}

/** Kills the service process (SIGKILL) and starts the next at once. */
async function killService(): Promise<void> {
  live.child.kill("SIGKILL");
  await live.exited;
  await startService();
}

beforeAll(async () => {
  [fault, rs, port] = await Promise.all([startFaultServer(), startRestate(), freePort()]);
  workers = warmWorkers(SERVICE, {});
  await startService();
  await rs.register(`http://127.0.0.1:${port}`);
}, 90_000);
afterAll(async () => {
  live?.child.kill("SIGKILL");
  await workers?.close();
  await rs?.stop();
  await fault?.close();
  rmSync(dir, { recursive: true, force: true });
});

const json = { "content-type": "application/json" };

/** Submits `handler(input)` once under `key`; its invocation id. */
async function send(handler: string, input: unknown, key: string): Promise<string> {
  const res = await fetch(`${rs.ingress}/agent/${handler}/send`, {
    method: "POST",
    headers: { ...json, "idempotency-key": key },
    body: JSON.stringify(input),
  });
  if (res.status >= 300) throw new Error(`send: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { invocationId: string }).invocationId;
}

/** The invocation's end (its value, or its terminal error), or undefined while it runs. */
async function output(id: string, wait = false) {
  const res = await fetch(`${rs.ingress}/restate/invocation/${id}/${wait ? "attach" : "output"}`);
  if (res.status === 470) return undefined;
  const body = (await res.json()) as unknown;
  return res.ok
    ? { answer: body as string }
    : { error: body as { message: string; metadata?: Record<string, string> } };
}

/** What the provider was asked and billed for `model`. */
function asked(model: string) {
  const t = fault.stats().timeline.filter((a) => a.model === model);
  return { requests: t.length, billed: t.reduce((s, a) => s + (a.billed ?? 0), 0), t };
}

/** One agent run (the `loop` or `aiLoop` handler); its service process killed at random
 * points until `budget` kills landed or the run ended. */
async function agentRun(loop: string, ms: number, random: () => number, budget: number) {
  const id = `${loop}-${++n}`;
  const input = { model: `m-${id}`, service: join(dir, `${id}.db`) };
  const t0 = Date.now();
  const invocation = await send(loop, input, id);
  let kills = 0;
  while (kills < budget) {
    await new Promise((r) => setTimeout(r, random() * ms));
    if ((await output(invocation)) !== undefined) break;
    await killService();
    kills++;
  }
  const end = await output(invocation, true);
  return {
    kills,
    end,
    ms: Date.now() - t0,
    asked: asked(input.model),
    effects: service(input.service),
  };
}

describe("breakwater/restate: the agent loop, its service killed at 20 points", () => {
  it.each([
    ["loop", "openai's client, each call a run()"],
    ["aiLoop", "the AI SDK's generateText through durableCalls"],
  ])(
    "%s (%s): the uninterrupted run's answer, nobody charged twice, no finished call sent again",
    async (loop) => {
      fault.setScript({ agent: { tool: "charge", calls: 8 }, rules: [{ headersDelayMs: 25 }] });
      const clean = await agentRun(loop, 0, () => 0, 0);
      expect(clean.asked.requests).toBe(9); // eight tool turns and the answer
      expect(clean.end?.answer).toMatch(/^done after 8 tool calls: /);
      expect(clean.effects.effects).toBe(8);
      const maxCall = Math.max(...clean.asked.t.map((a) => a.billed ?? 0));
      const random = mulberry32(loop === "loop" ? 43 : 47);
      const runs: Awaited<ReturnType<typeof agentRun>>[] = [];
      for (let kills = 0; kills < 20; ) {
        const r = await agentRun(loop, clean.ms, random, 20 - kills);
        kills += r.kills;
        runs.push(r);
      }
      const rerun = (t: (typeof runs)[number]) =>
        t.effects.executions.reduce((s, e) => s + e.n - 1, 0);
      for (const t of runs) {
        expect(t.end?.answer).toBe(clean.end?.answer);
        expect(t.effects.effects).toBe(8);
        expect(rerun(t)).toBeLessThanOrEqual(t.kills);
        expect(t.asked.requests).toBeLessThanOrEqual(clean.asked.requests + t.kills);
        expect(t.asked.billed).toBeLessThanOrEqual(clean.asked.billed + t.kills * maxCall);
      }
      const sum = (f: (t: (typeof runs)[number]) => number) => runs.reduce((s, t) => s + f(t), 0);
      expect(sum((t) => t.kills)).toBe(20);
      console.log(
        `restate ${loop}: 20 kills over ${runs.length} runs; requests ${sum((t) => t.asked.requests)} (uninterrupted ${runs.length * clean.asked.requests}); tool bodies run again ${sum(rerun)}`,
      );
    },
    240_000,
  );
});

describe("breakwater/restate: what Restate is handed", () => {
  it("a context-length 400 is sent once, a TerminalError naming the reason; asked again, the journal answers", async () => {
    const model = `m-ctx-${++n}`;
    fault.setScript({ rules: [{ model, status: 400, error: "context_length" }] });
    const id = await send("ask", { model }, `ctx-${n}`);
    const end = await output(id, true);
    expect(end?.error?.metadata?.["breakwater.reason"]).toBe("not-retryable");
    expect(end?.error?.message).toMatch(/context length/);
    expect(asked(model).requests).toBe(1);
    expect(await send("ask", { model }, `ctx-${n}`)).toBe(id); // the same invocation
    expect((await output(id, true))?.error).toBeDefined();
    expect(asked(model).requests).toBe(1);
  }, 60_000);

  it("a 503 storm: breakwater's 3 attempts, then a TerminalError: 3 requests, Restate retries none", async () => {
    const model = `m-503-${++n}`;
    fault.setScript({ rules: [{ model, status: 503 }] });
    const end = await output(await send("ask", { model }, `s-${n}`), true);
    expect(end?.error?.metadata?.["breakwater.reason"]).toBe("attempts-exhausted");
    expect(asked(model).requests).toBe(3);
  }, 60_000);

  // These steps hold 1 s (5 s by default): the wait they hand on is as long, in less time.
  it("a 429 with Retry-After 3 s (past the 1 s the step holds) is a ctx.sleep: the service dies during it, the next answers 3-14 s later", async () => {
    const model = `m-429-${++n}`;
    fault.setScript({ rules: [{ model, status: 429, retryAfter: 3, times: 1 }] });
    const id = await send("ask", { model, holdMs: 1_000 }, `ra-${n}`);
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
    const model = `m-stream-${++n}`;
    fault.setScript({ rules: [{ model, status: 503, times: 1 }] });
    const id = await send("aiStream", { model }, `st-${n}`);
    const end = await output(id, true);
    expect(((end?.answer ?? []) as unknown as string[]).join("")).toBe(
      "The fault server says hello, one word at a time.",
    );
    expect(asked(model).requests).toBe(2); // the 503 before content retried in the step
    expect(await send("aiStream", { model }, `st-${n}`)).toBe(id);
    expect(asked(model).requests).toBe(2);
  }, 60_000);

  it("durableCalls hands a Retry-After past the step's hold to a ctx.sleep, through the AI SDK's error class", async () => {
    const model = `m-ra-stream-${++n}`;
    fault.setScript({ rules: [{ model, status: 429, retryAfter: 2, times: 1 }] });
    const end = await output(await send("aiStream", { model, holdMs: 1_000 }, `rs-${n}`), true);
    expect(((end?.answer ?? []) as unknown as string[]).join("")).toMatch(/^The fault server/);
    const t = asked(model).t;
    expect(t.length).toBe(2);
    expect(t[1]!.at - t[0]!.at).toBeGreaterThanOrEqual(2_000);
  }, 60_000);

  it("an open breaker switches to the fallback inside the step", async () => {
    const model = `m-down-${++n}`;
    const second = `m-up-${n}`;
    fault.setScript({ rules: [{ model, status: 500 }] });
    const first = await output(await send("ask", { model, fallback: second }, `b1-${n}`), true);
    expect(first?.answer).toBeDefined(); // the 500 opened the primary's breaker; the second answered
    const before = asked(model).requests;
    const again = await output(await send("ask", { model, fallback: second }, `b2-${n}`), true);
    expect(again?.answer).toBeDefined();
    expect(asked(model).requests).toBe(before); // nothing sent to the open primary
    expect(asked(second).requests).toBe(2);
  }, 60_000);
});
