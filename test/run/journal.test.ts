import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type Journal, MemoryJournal } from "../../src/run/journal.ts";
import { Run } from "../../src/run/run.ts";
import { SqliteJournal } from "../../src/run/sqlite-journal.ts";

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
