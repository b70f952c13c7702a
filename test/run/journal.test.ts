import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type Journal, MemoryJournal, RunClaimedError } from "../../src/run/journal.ts";
import { Run } from "../../src/run/run.ts";
import { SqliteJournal } from "../../src/run/sqlite-journal.ts";
import { fencing } from "./fixtures/fencing.ts";

/** Runs a three-step agent; `failAt` makes that step throw (a crash, a provider outage). */
async function agent(run: Run, calls: string[], failAt?: string) {
  const step = (name: string, value: unknown) =>
    run.step(name, async () => {
      calls.push(name);
      if (name === failAt)
        throw new Error(`step ${name} failed with key sk-secret-0123456789abcdef`);
      return value;
    });
  const plan = await step("plan", { tasks: ["search", "summarise"] });
  const search = await step("search", { hits: 3 });
  const answer = await step(
    "answer",
    `done after ${(plan as { tasks: string[] }).tasks.length} tasks and ${(search as { hits: number }).hits} hits`,
  );
  return answer;
}

describe.each([
  ["MemoryJournal", () => new MemoryJournal()],
  ["SqliteJournal", () => new SqliteJournal()],
] as [string, () => Journal][])("%s", (_, make) => {
  it("a run restarted with the same id resumes at the failed step", async () => {
    const journal = make();
    const first: string[] = [];
    const run1 = new Run({ id: "run-42", journal });
    await expect(agent(run1, first, "answer")).rejects.toThrow(/step answer failed/);
    expect(first).toEqual(["plan", "search", "answer"]);

    const second: string[] = [];
    const run2 = new Run({ id: "run-42", journal });
    expect(await agent(run2, second)).toBe("done after 2 tasks and 3 hits");
    expect(second).toEqual(["answer"]); // plan and search came from the journal
    expect(run2.stats.stepsReplayed).toBe(2);
    const steps = await journal.steps("run-42");
    expect(steps.map((s) => `${s.step}:${s.status}`)).toEqual([
      "plan:ok",
      "search:ok",
      "answer:ok",
    ]);
  });

  it("records a failure with secrets masked, and another run id starts fresh", async () => {
    const journal = make();
    await expect(agent(new Run({ id: "a", journal }), [], "search")).rejects.toThrow();
    const failed = await journal.get("a", "search");
    expect(failed?.status).toBe("failed");
    expect(failed?.error).toMatch(/step search failed/);
    expect(failed?.error).not.toContain("0123456789abcdef");
    const calls: string[] = [];
    await agent(new Run({ id: "b", journal }), calls);
    expect(calls).toEqual(["plan", "search", "answer"]);
  });

  it("a step recorded ok is never overwritten by a late failure", async () => {
    const journal = make();
    const ok = { runId: "r", step: "charge", status: "ok" as const, value: 1, at: 1 };
    await journal.put(ok);
    await journal.put({ runId: "r", step: "charge", status: "failed", error: "late", at: 2 });
    expect(await journal.get("r", "charge")).toEqual(ok);
    // A failure is replaced by the success that follows it.
    await journal.put({ runId: "r", step: "refund", status: "failed", error: "x", at: 3 });
    await journal.put({ runId: "r", step: "refund", status: "ok", value: 2, at: 4 });
    expect((await journal.get("r", "refund"))?.status).toBe("ok");
  });

  it("a long step keeps its lease while it runs", async () => {
    const journal = make();
    const a = new Run({ id: "long", journal, owner: "a", leaseMs: 60 });
    const b = new Run({ id: "long", journal, owner: "b" });
    let refused: unknown;
    await a.step("slow", async () => {
      await new Promise((r) => setTimeout(r, 250)); // four leases long
      refused = await b.step("steal", () => 1).catch((e: unknown) => e);
      return 1;
    });
    expect(String(refused)).toMatch(/held by worker "a" until /);
  });

  it("a run's lease keeps a second owner off it until released or expired", async () => {
    const journal = make();
    const a = new Run({ id: "leased", journal, owner: "a" });
    const b = new Run({ id: "leased", journal, owner: "b", leaseMs: 50 });
    await a.step("one", () => 1);
    await expect(b.step("one", () => 1)).rejects.toThrow(
      /run "leased" is held by worker "a" until /,
    );
    await a.release();
    expect(await b.step("two", () => 2)).toBe(2);
    // b's lease (50 ms) runs out: a may take the run back.
    await new Promise((r) => setTimeout(r, 80));
    expect(await a.step("three", () => 3)).toBe(3);
  });

  it("each claim takes the next generation; a write under an earlier one is refused", () =>
    fencing(make()));

  it("a run whose claim was taken over stops: its results are refused, the new owner's stand", async () => {
    const journal = make();
    const old = new Run({ id: "pod", journal, owner: "pod-1" });
    await old.step("plan", () => "old plan");
    let resume!: () => void;
    const late = old.step("charge", async () => {
      await new Promise<void>((r) => (resume = r)); // frozen mid-step
      return "charged by the old process";
    });
    await new Promise((r) => setTimeout(r, 5));
    // The pod restarts under the same name while the old process is frozen: it takes the
    // run back at once, replays the plan, and runs the step itself.
    const restarted = new Run({ id: "pod", journal, owner: "pod-1" });
    expect(await restarted.step("plan", () => "new plan")).toBe("old plan");
    expect(await restarted.step("charge", () => "charged by the restarted pod")).toBe(
      "charged by the restarted pod",
    );
    resume(); // the old process thaws
    const refused = await late.catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RunClaimedError);
    expect((refused as RunClaimedError).takenOver).toBe(true);
    expect(String(refused)).toMatch(
      /run "pod" was taken over by worker "pod-1" while this worker ran it/,
    );
    await expect(old.step("next", () => 1)).rejects.toThrow(/was taken over/);
    expect((await journal.get("pod", "charge"))?.value).toBe("charged by the restarted pod");
    expect(await journal.get("pod", "next")).toBeUndefined();
    await old.release(); // lets go of nothing: the lease is the restarted pod's
    expect((await journal.holder!("pod"))?.owner).toBe("pod-1");
    await restarted.release();
    expect(await journal.holder!("pod")).toBeUndefined();
  });

  it("steps started together share one claim", async () => {
    const journal = make();
    const run = new Run({ id: "parallel", journal });
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) => run.step(`s${i}`, () => i)));
    expect(all).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect((await journal.steps("parallel")).length).toBe(8); // none refused by another's claim
  });
});

describe("journals", () => {
  it("SQLite keeps the steps across processes (a file reopened)", async () => {
    const file = join(await mkdtemp(join(tmpdir(), "bw-journal-")), "steps.db");
    const j1 = new SqliteJournal(file);
    await expect(agent(new Run({ id: "r", journal: j1 }), [], "answer")).rejects.toThrow();
    j1.close();
    const j2 = new SqliteJournal(file);
    const calls: string[] = [];
    await agent(new Run({ id: "r", journal: j2 }), calls);
    expect(calls).toEqual(["answer"]);
    j2.close();
  });

  it("SQLite errors name the file, the run and the step", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bw-journal-"));
    expect(() => new SqliteJournal(dir)).toThrow(
      new RegExp(`SqliteJournal\\(${dir}\\): could not open the journal`),
    );
    const j = new SqliteJournal(join(dir, "steps.db"));
    j.close();
    expect(() => j.put({ runId: "r-1", step: "plan", status: "ok", value: 1, at: 0 })).toThrow(
      /could not record step "plan" of run "r-1"/,
    );
    expect(() => new SqliteJournal(":memory:", { busyTimeoutMs: -1 })).toThrow(/busyTimeoutMs/);
    expect(() => new Run({ leaseMs: 0 })).toThrow(/leaseMs/);
  });

  it("a step's result must be JSON; bad input is named", async () => {
    const run = new Run({ journal: new MemoryJournal() });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await expect(run.step("s", () => cyclic)).rejects.toThrow(
      /Run.step "s": its result must be JSON/,
    );
    await expect(run.step("", () => 1)).rejects.toThrow(/"name" must be a non-empty string/);
    expect(() => new Run({ journal: {} as never })).toThrow(/"journal" must be a Journal/);
  });

  it("without a journal a step just runs", async () => {
    const run = new Run();
    let n = 0;
    await run.step("x", () => ++n);
    await run.step("x", () => ++n);
    expect(n).toBe(2);
  });
});

describe("SqliteJournal where Node has no node:sqlite", () => {
  it("says what it needs and what to do, not the loader's error", () => {
    const real = process.getBuiltinModule;
    (process as { getBuiltinModule?: unknown }).getBuiltinModule = () => undefined;
    try {
      expect(() => new SqliteJournal(":memory:")).toThrow(
        /breakwater\/sqlite needs node:sqlite, built into Node >= 22\.13.*this is Node .*Upgrade Node, or use MemoryJournal/,
      );
    } finally {
      process.getBuiltinModule = real;
    }
  });
});
