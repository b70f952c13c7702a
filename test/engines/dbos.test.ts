import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";
import { mulberry32 } from "../../src/testing/random.ts";
import { startPostgres, type TestPostgres } from "../fixtures/postgres.ts";
import { service, warmWorkers, worker } from "../run/fixtures/workers.ts";
import { complete, killChain } from "./fixtures/kills.ts";

// breakwater inside DBOS (docs/architecture.md, rule 22), on a real Postgres: DBOS's step
// retries off, breakwater's policy inside each step, a long wait a durable DBOS.sleepms.
const WORKER = join(import.meta.dirname, "fixtures", "dbos-worker.ts");
const dir = mkdtempSync(join(tmpdir(), "bw-dbos-"));
let fault: FaultServer;
let pg: TestPostgres;
let n = 0;

beforeAll(async () => {
  [fault, pg] = await Promise.all([startFaultServer(), startPostgres()]);
}, 60_000);
afterAll(async () => {
  await fault?.close();
  await pg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A run's arguments: its own model name (its requests at the fault server) and service. */
function args(mode: "agent" | "ask", extra: Record<string, unknown> = {}) {
  const id = `${mode}-${++n}`;
  return {
    pg: pg.url,
    fault: fault.url,
    service: join(dir, `${id}.db`),
    runId: id,
    model: `m-${id}`,
    mode,
    ...extra,
  };
}

/** What the provider was asked and billed for `model`. */
function asked(model: string) {
  const t = fault.stats().timeline.filter((a) => a.model === model);
  return { requests: t.length, billed: t.reduce((s, a) => s + (a.billed ?? 0), 0), t };
}

type RunOut = Awaited<ReturnType<typeof killChain>> & {
  asked: ReturnType<typeof asked>;
  effects: ReturnType<typeof service>;
};

const once = (a: Record<string, unknown>) => {
  const w = worker({}, WORKER, true);
  w.child.stdin!.end(`${JSON.stringify(a)}\n`);
  return w;
};

describe("breakwater/dbos: the agent loop killed at 20 points and resumed by DBOS", () => {
  it("ends as the uninterrupted run, charges nobody twice, sends no finished call again", async () => {
    fault.setScript({ agent: { tool: "charge", calls: 8 }, rules: [{ headersDelayMs: 25 }] });
    const workers = warmWorkers(WORKER, {});
    try {
      const base = args("agent");
      const clean = await complete(workers.take(base));
      const uninterrupted = asked(base.model);
      expect(uninterrupted.requests).toBe(9); // eight tool turns and the answer
      expect(clean.answer).toMatch(/^done after 8 tool calls: /);
      expect(service(base.service).effects).toBe(8);
      const maxCall = Math.max(...uninterrupted.t.map((a) => a.billed ?? 0));
      const random = mulberry32(41);
      const runs: RunOut[] = [];
      for (let kills = 0; kills < 20; ) {
        const a = args("agent");
        const c = await killChain(() => workers.take(a), clean.ms, random, 20 - kills);
        kills += c.kills;
        runs.push({ ...c, asked: asked(a.model), effects: service(a.service) });
      }
      const rerun = (t: (typeof runs)[number]) =>
        t.effects.executions.reduce((s, e) => s + e.n - 1, 0);
      for (const t of runs) {
        expect(t.last.answer).toBe(clean.answer);
        expect(t.effects.effects).toBe(8); // each charge once, under its step's key
        expect(rerun(t)).toBeLessThanOrEqual(t.kills);
        // Finished model calls are never sent again: only the one in flight at a kill.
        expect(t.asked.requests).toBeLessThanOrEqual(uninterrupted.requests + t.kills);
        expect(t.asked.billed).toBeLessThanOrEqual(uninterrupted.billed + t.kills * maxCall);
      }
      const sum = (f: (t: (typeof runs)[number]) => number) => runs.reduce((s, t) => s + f(t), 0);
      expect(sum((t) => t.kills)).toBe(20);
      console.log(
        `dbos: 20 kills over ${runs.length} runs; requests ${sum((t) => t.asked.requests)} (uninterrupted ${runs.length * uninterrupted.requests}); tool bodies run again ${sum(rerun)}`,
      );
    } finally {
      await workers.close();
    }
  }, 240_000);
});

describe("breakwater/dbos: what DBOS is handed", () => {
  it("a context-length 400 is sent once, recorded, and not sent again when the workflow is asked again", async () => {
    const a = args("ask");
    fault.setScript({ rules: [{ model: a.model, status: 400, error: "context_length" }] });
    const r = await complete(once(a));
    expect(r.error?.reason).toBe("not-retryable");
    expect(asked(a.model).requests).toBe(1);
    const again = await complete(once(a)); // the same workflow id: DBOS's record answers
    expect(again.error?.reason).toBe("not-retryable");
    expect(asked(a.model).requests).toBe(1);
  }, 60_000);

  it("a 503 storm: breakwater's 3 attempts, then the workflow ends: 3 requests, DBOS retries none", async () => {
    const a = args("ask");
    fault.setScript({ rules: [{ model: a.model, status: 503 }] });
    const r = await complete(once(a));
    expect(r.error?.reason).toBe("attempts-exhausted");
    expect(asked(a.model).requests).toBe(3);
  }, 60_000);

  // The step holds 1 s here (5 s by default): the wait it hands on is as long, in less time.
  it("a 429 with Retry-After 3 s (past the 1 s the step holds) is a durable sleep: the process that met it dies, the next answers 3-14 s later", async () => {
    const a = { ...args("ask"), holdMs: 1_000 };
    fault.setScript({ rules: [{ model: a.model, status: 429, retryAfter: 3, times: 1 }] });
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
