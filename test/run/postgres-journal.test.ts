import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/run/postgres-journal.ts";
import { Run } from "../../src/run/run.ts";
import { mulberry32 } from "../../src/testing/random.ts";
import { startPostgres, type TestPostgres } from "../fixtures/postgres.ts";
import { fencing } from "./fixtures/fencing.ts";
import { frozenAndThawed, killRepeatedly, lastLine, service, worker } from "./fixtures/workers.ts";

// A real PostgreSQL (Debian's binaries, a throwaway cluster on loopback), no mocks.
let server: TestPostgres;
let pool: pg.Pool;
const dir = mkdtempSync(join(tmpdir(), "bw-pgj-"));
let schemas = 0;
const fresh = () => ({ schema: `j${++schemas}`, service: join(dir, `s${schemas}.db`) });

beforeAll(async () => {
  server = await startPostgres();
  pool = new pg.Pool({ connectionString: server.url, max: 8 });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("PostgresJournal", () => {
  it("creates and migrates its schema once, with workers opening it at the same time", async () => {
    const { schema } = fresh();
    const all = await Promise.all(
      Array.from({ length: 6 }, () => PostgresJournal.open({ pool, schema })),
    );
    expect(await all[0]!.migrate()).toBe(2);
    const { rows } = await pool.query(`SELECT version FROM ${schema}.migrations ORDER BY version`);
    expect(rows).toEqual([{ version: 1 }, { version: 2 }]);
  });

  it("resumes a run at its failed step; ok is never overwritten", async () => {
    const journal = await PostgresJournal.open({ pool, schema: fresh().schema });
    const calls: string[] = [];
    const agent = async (run: Run, failAt?: string) => {
      for (const s of ["plan", "search", "answer"])
        await run.step(s, () => {
          calls.push(s);
          if (s === failAt) throw new Error(`${s} failed, key sk-secret-0123456789abcdef`);
          return { s };
        });
    };
    await expect(agent(new Run({ id: "r1", journal }), "search")).rejects.toThrow();
    expect((await journal.get("r1", "search"))?.error).not.toContain("0123456789abcdef");
    await agent(new Run({ id: "r1", journal }));
    expect(calls).toEqual(["plan", "search", "search", "answer"]);
    await journal.put({ runId: "r1", step: "plan", status: "failed", error: "late", at: 9 });
    expect(await journal.get("r1", "plan")).toMatchObject({ status: "ok", value: { s: "plan" } });
    expect((await journal.steps("r1")).map((s) => s.step)).toEqual(["plan", "search", "answer"]);
    // A step that returned null replays null (JSON null is not "no value").
    await new Run({ id: "r2", journal }).step("nothing", () => null);
    expect(await journal.get("r2", "nothing")).toMatchObject({ status: "ok", value: null });
    let ran = false;
    const again = await new Run({ id: "r2", journal }).step("nothing", () => {
      ran = true;
      return 1;
    });
    expect([again, ran]).toEqual([null, false]);
  });

  it("leases on the database's clock; takeOver hands each expired run to one sweeper", async () => {
    const journal = await PostgresJournal.open({ pool, schema: fresh().schema });
    expect(await journal.claim("a", "w1", 60_000)).toBe(1);
    expect(await journal.claim("a", "w2", 60_000)).toBe(false);
    expect(await journal.claim("a", "w1", 60_000, 1)).toBe(1); // renewed by its claim
    for (let i = 0; i < 20; i++) await journal.claim(`dead-${i}`, "crashed", 1);
    await new Promise((r) => setTimeout(r, 20));
    const [x, y] = await Promise.all([
      journal.takeOver("sweeper-x", 60_000, 15),
      journal.takeOver("sweeper-y", 60_000, 15),
    ]);
    expect(x.length + y.length).toBe(20);
    expect(new Set([...x, ...y]).size).toBe(20); // none taken twice
    expect(await journal.takeOver("sweeper-z", 60_000)).toEqual([]);
    await journal.release("a", "w1");
    expect(await journal.claim("a", "w2", 60_000)).toBe(2);
    await journal.release("a", "w2");
    await new Promise((r) => setTimeout(r, 5));
    expect(await journal.takeOver("sweeper-z", 60_000)).toEqual([]); // released: not a dead worker's
  });

  it("each claim takes the next generation; a write under an earlier one is refused", async () => {
    await fencing(await PostgresJournal.open({ pool, schema: fresh().schema }));
  });

  it("a takeover bumps the generation: the dead worker's writes are refused", async () => {
    const journal = await PostgresJournal.open({ pool, schema: fresh().schema });
    const g = (await journal.claim("t", "dead", 1)) as number;
    await new Promise((r) => setTimeout(r, 10));
    expect(await journal.takeOver("sweeper", 60_000)).toEqual(["t"]);
    const late = { runId: "t", step: "s", status: "ok" as const, value: 1, at: 1 };
    expect(await journal.put(late, { owner: "dead", generation: g })).toBe(false);
    expect(await journal.put(late, { owner: "sweeper", generation: g + 1 })).toBe(true);
  });

  it("names what it could not do, and checks its options", async () => {
    await expect(PostgresJournal.open({ pool: {} as never })).rejects.toThrow(
      /"pool" must be a pg Pool/,
    );
    await expect(PostgresJournal.open({ pool, schema: "Robert'); DROP" })).rejects.toThrow(
      /"schema" must be a lower-case SQL name/,
    );
    const dead = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/postgres" });
    await expect(PostgresJournal.open({ pool: dead })).rejects.toThrow(
      /PostgresJournal\(breakwater\): could not migrate the schema/,
    );
    await dead.end();
  });
});

describe("PostgresJournal across processes", () => {
  it("the same run in two processes: one runs it, the other is refused", async () => {
    const { schema, service: svc } = fresh();
    const args = {
      pg: server.url,
      db: schema,
      service: svc,
      runId: "shared",
      steps: 30,
      stepMs: 10,
    };
    const ends = await Promise.all([
      worker({ ...args, owner: "a" }).exited,
      worker({ ...args, owner: "b" }).exited,
    ]);
    const outcomes = ends.map((e) => lastLine(e.out)).sort();
    expect(outcomes[0]).toBe("done");
    expect(outcomes[1]).toMatch(/^refused: BreakwaterRunClaimedError/);
    const s = service(svc);
    expect(s.effects).toBe(30);
    expect(s.executions.every((e) => e.n === 1)).toBe(true);
  }, 60_000);

  it("kill -9 at 20 random points, then resume: no step lost, no effect twice", async () => {
    const { schema, service: svc } = fresh();
    const args = {
      pg: server.url,
      db: schema,
      service: svc,
      runId: "killed",
      steps: 30,
      stepMs: 12,
      owner: "pod-1",
    };
    const kills = await killRepeatedly(args, 20, mulberry32(18));
    expect(lastLine((await worker(args).exited).out)).toBe("done");
    const journal = await PostgresJournal.open({ pool, schema });
    const steps = await journal.steps("killed");
    expect(steps.map((s) => s.step)).toEqual(Array.from({ length: 30 }, (_, i) => `s${i}`));
    expect(steps.every((s) => s.status === "ok" && s.value === Number(s.step.slice(1)))).toBe(true);
    const s = service(svc);
    expect(s.effects).toBe(30);
    expect(s.executions.reduce((n, e) => n + e.n - 1, 0)).toBeLessThanOrEqual(kills);
  }, 120_000);

  it("a worker killed holding a lease: another machine takes the run over once it expires", async () => {
    const { schema, service: svc } = fresh();
    // The lease outlasts a worker's start on a loaded machine (a Node process and its
    // imports can take over a second there), so the early try is early.
    const leaseMs = 4_000;
    const args = { pg: server.url, db: schema, service: svc, steps: 30, stepMs: 10, leaseMs };
    const a = worker({ ...args, runId: "handover", owner: "machine-a" });
    await a.started;
    await new Promise((r) => setTimeout(r, 120));
    a.child.kill("SIGKILL");
    const killedAt = performance.now();
    await a.exited;
    const early = await worker({ ...args, takeOver: true, owner: "machine-b" }).exited;
    expect(early.out).toContain("took over nothing");
    const expired = killedAt + leaseMs + 100 - performance.now();
    await new Promise((r) => setTimeout(r, Math.max(0, expired)));
    const later = await worker({ ...args, takeOver: true, owner: "machine-b" }).exited;
    expect(later.out).toContain("took over handover");
    expect(lastLine(later.out)).toBe("done");
    expect(service(svc).effects).toBe(30);
  }, 60_000);

  it("a worker frozen past its lease (SIGSTOP), taken over and thawed, cannot overwrite the new owner's steps", async () => {
    const { schema, service: svc } = fresh();
    const args = {
      pg: server.url,
      db: schema,
      service: svc,
      runId: "frozen",
      steps: 6,
      stamp: true,
    };
    const { a, b } = await frozenAndThawed(args, 600);
    expect(b).toBe("done");
    expect(a).toMatch(/^refused: BreakwaterRunClaimedError: run "frozen" was taken over/);
    const journal = await PostgresJournal.open({ pool, schema });
    const values = (await journal.steps("frozen")).map((s) => s.value);
    expect(values).toEqual(["a:0", "a:1", "b:2", "b:3", "b:4", "b:5"]);
  }, 60_000);
});
