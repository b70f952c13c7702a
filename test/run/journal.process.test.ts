import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteJournal } from "../../src/run/sqlite-journal.ts";
import { killedAndResumed } from "./fixtures/killed-and-resumed.ts";
import { frozenAndThawed, lastLine, service, worker } from "./fixtures/workers.ts";

// Real processes on one SQLite file: what breaks a journal is other processes and kill -9.
const dir = mkdtempSync(join(tmpdir(), "bw-journal-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const paths = () => ({ db: join(dir, `j${++files}.db`), service: join(dir, `s${files}.db`) });

describe("SqliteJournal across processes", () => {
  it("forty processes opening one new file at the same instant all open it (three times)", async () => {
    const opener = join(import.meta.dirname, "fixtures", "open-journal.ts");
    const open = (db: string, at: number) =>
      new Promise<string>((resolve) => {
        const c = spawn(process.execPath, [opener, db, String(at)], {
          stdio: ["ignore", "pipe", "inherit"],
        });
        let out = "";
        c.stdout.on("data", (d: Buffer) => (out += d.toString()));
        c.on("close", () => resolve(out.trim())); // "exit" may come before the last output
      });
    for (let round = 0; round < 3; round++) {
      const db = join(dir, `fresh-${++files}.db`);
      const at = Date.now() + 3_000; // after every process has started
      const outs = await Promise.all(Array.from({ length: 40 }, () => open(db, at)));
      expect(outs.filter((o) => o !== "ok")).toEqual([]);
    }
  }, 90_000);

  it("a run ended cleanly can be run again at once by another process (its lease let go on exit)", async () => {
    const { db, service: svc } = paths();
    // No owner given: each process is its own owner (the default).
    const args = { db, service: svc, runId: "again", steps: 5 };
    expect(lastLine((await worker(args).exited).out)).toBe("done");
    const second = await worker({ ...args, steps: 8 }).exited;
    expect(lastLine(second.out)).toBe("done");
    const j = new SqliteJournal(db);
    expect(j.steps("again")).toHaveLength(8);
    expect(j.holder("again")).toBeUndefined(); // let go again
    j.close();
  }, 60_000);

  it("after kill -9, another process is told who holds the run, until when, and how to go on", async () => {
    const { db, service: svc } = paths();
    const args = { db, service: svc, runId: "crashed", steps: 400, stepMs: 20, owner: "pod-7" };
    const w = worker(args);
    await w.started;
    await new Promise((r) => setTimeout(r, 150));
    w.child.kill("SIGKILL");
    await w.exited;
    const refused = await worker({ ...args, owner: undefined, steps: 1 }).exited;
    const line = lastLine(refused.out)!;
    expect(line).toMatch(
      /^refused: BreakwaterRunClaimedError: run "crashed" is held by worker "pod-7" until \d{4}-\d\d-\d\dT/,
    );
    expect(line).toMatch(/owner: "pod-7"/); // how to take it over now
    // Started as that worker, it goes on at once.
    expect(lastLine((await worker({ ...args, steps: 3 }).exited).out)).toBe("done");
  }, 60_000);

  it("two processes × 2000 steps on one file (different runs): nothing lost, nothing locked out", async () => {
    const { db, service: svc } = paths();
    const ws = ["a", "b"].map((id) =>
      worker({ db, service: svc, runId: `run-${id}`, steps: 2000, owner: id }),
    );
    const ends = await Promise.all(ws.map((w) => w.exited));
    expect(ends.map((e) => e.out.trim().split("\n").at(-1))).toEqual(["done", "done"]);
    const j = new SqliteJournal(db);
    for (const id of ["a", "b"]) {
      const steps = j.steps(`run-${id}`);
      expect(steps).toHaveLength(2000);
      expect(steps.every((s) => s.status === "ok")).toBe(true);
    }
    j.close();
    const s = service(svc);
    expect(s.effects).toBe(4000);
    expect(s.executions.every((e) => e.n === 1)).toBe(true);
  }, 60_000);

  it("the same run in two processes: one runs it, the other is refused; no step runs twice", async () => {
    const { db, service: svc } = paths();
    // The second starts once the first is inside its first step, which it holds for 5 s:
    // long past a process's start on a loaded machine (with 0.4 s of steps the first could
    // finish before the second began, and the second then found the run done).
    const args = { db, service: svc, runId: "shared", steps: 40, stepMs: 10 };
    const a = worker({ ...args, owner: "a", holdAt: 0, holdMs: 5_000 });
    await a.holding;
    const b = worker({ ...args, owner: "b" });
    const ends = await Promise.all([a.exited, b.exited]);
    const outcomes = ends.map((e) => e.out.trim().split("\n").at(-1));
    expect(outcomes[0]).toBe("done");
    expect(outcomes[1]).toMatch(/^refused: BreakwaterRunClaimedError: run "shared" is held/);
    const s = service(svc);
    expect(s.executions.every((e) => e.n === 1)).toBe(true);
    expect(s.effects).toBe(40);
  }, 60_000);

  killedAndResumed(1, paths);

  it("a worker that died holding the lease: another owner waits it out, then resumes the run", async () => {
    const { db, service: svc } = paths();
    const args = { db, service: svc, runId: "handover", steps: 30, stepMs: 10, leaseMs: 1500 };
    const a = worker({ ...args, owner: "a" });
    await a.started;
    await new Promise((r) => setTimeout(r, 100));
    a.child.kill("SIGKILL");
    await a.exited;
    const early = await worker({ ...args, owner: "b" }).exited;
    expect(early.out).toMatch(/refused: BreakwaterRunClaimedError/);
    await new Promise((r) => setTimeout(r, 1600));
    const later = await worker({ ...args, owner: "b" }).exited;
    expect(later.out.trim().split("\n").at(-1)).toBe("done");
    const s = service(svc);
    expect(s.effects).toBe(30);
  }, 60_000);

  it("a worker frozen past its lease (SIGSTOP), taken over and thawed, cannot overwrite the new owner's steps", async () => {
    const { db, service: svc } = paths();
    const args = { db, service: svc, runId: "frozen", steps: 6, stamp: true };
    const { a, b } = await frozenAndThawed(args, 600);
    expect(b).toBe("done");
    expect(a).toMatch(/^refused: BreakwaterRunClaimedError: run "frozen" was taken over/);
    const j = new SqliteJournal(db);
    const values = j.steps("frozen").map((s) => s.value);
    j.close();
    // a ran s0 and s1 before it froze inside s2; b replayed them and ran the rest.
    expect(values).toEqual(["a:0", "a:1", "b:2", "b:3", "b:4", "b:5"]);
  }, 60_000);

  it("a file made before leases had generations is migrated on open, by one of many processes", async () => {
    const { db } = paths();
    const { DatabaseSync } = await import("node:sqlite");
    const old = new DatabaseSync(db);
    old.exec(`CREATE TABLE breakwater_steps (run_id TEXT NOT NULL, step TEXT NOT NULL,
      status TEXT NOT NULL, value TEXT, error TEXT, at REAL NOT NULL, PRIMARY KEY (run_id, step));
      CREATE TABLE breakwater_claims (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL);
      INSERT INTO breakwater_claims VALUES ('old', 'w', 0);
      INSERT INTO breakwater_steps VALUES ('old', 'plan', 'ok', '"kept"', NULL, 1);`);
    old.close();
    const opener = join(import.meta.dirname, "fixtures", "open-journal.ts");
    const at = Date.now() + 2_000;
    const outs = await Promise.all(
      Array.from(
        { length: 8 },
        () =>
          new Promise<string>((resolve) => {
            const c = spawn(process.execPath, [opener, db, String(at)], {
              stdio: ["ignore", "pipe", "inherit"],
            });
            let out = "";
            c.stdout.on("data", (d: Buffer) => (out += d.toString()));
            c.on("close", () => resolve(out.trim())); // "exit" may come before the last output
          }),
      ),
    );
    expect(outs.filter((o) => o !== "ok")).toEqual([]);
    const j = new SqliteJournal(db);
    expect(j.claim("old", "x", 60_000)).toBe(1); // the old row's generation 0, then 1
    expect(j.get("old", "plan")?.value).toBe("kept");
    j.close();
  }, 60_000);
});
