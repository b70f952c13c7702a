import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { guardedStream } from "../../src/policy/stream.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater } from "../../src/providers/openai.ts";
import { JournalDivergenceError, MemoryJournal } from "../../src/run/journal.ts";
import { Run } from "../../src/run/run.ts";
import { SqliteJournal } from "../../src/run/sqlite-journal.ts";
import { guardTool } from "../../src/tools/guard-tool.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

// Model calls made with a journaled run: a resumed run's SDK reads the recorded answers
// as it read the calls, and the provider sees no request for them.
const fs = useFaultServer();
const KEY = "sk-test-000000000000";
const clientFor = (run: Run) =>
  withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: KEY }), {
    policy: testPolicy().p,
    run,
  });

/** Three calls: a chat completion, a streamed one, a Responses call. */
async function agent(run: Run, second = "stream it") {
  const ai = clientFor(run);
  const a = await ai.chat.completions.create({
    model: "gpt-test",
    messages: [{ role: "user", content: "plan" }],
  });
  const s = await ai.chat.completions.create({
    model: "gpt-test",
    messages: [{ role: "user", content: second }],
    stream: true,
  });
  const chunks: string[] = [];
  for await (const c of s) chunks.push(c.choices[0]?.delta.content ?? "");
  const r = await ai.responses.create({ model: "gpt-test", input: "answer" });
  return { a: a.choices[0]!.message.content, id: a.id, stream: chunks, r: r.output_text };
}

describe.each([
  ["MemoryJournal", () => new MemoryJournal()],
  ["SqliteJournal", () => new SqliteJournal()],
])("model calls through withBreakwater(new OpenAI()) in a journaled run (%s)", (_, make) => {
  it("a run started again answers every finished call from the journal: no request, the same objects", async () => {
    const journal = make();
    const first = await agent(new Run({ id: "r", journal }));
    expect(fs.requests()).toBe(3);
    expect(first.a).toBe(TEXT);
    fs.server.resetStats();
    const again = new Run({ id: "r", journal });
    const second = await agent(again);
    expect(second).toEqual(first); // the stream's chunks too, as the SDK yields them
    expect(fs.requests()).toBe(0);
    expect(again.stats.callsReplayed).toBe(3);
    expect(again.billed).toEqual({ inputTokens: 0, outputTokens: 0 }); // nothing paid twice
  });

  it("a stream stopped mid-answer (guardedStream(s).return()) while the SDK reads is not recorded: the run started again asks for it live", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 2, action: "stall" } }] });
    const journal = make();
    const ai = clientFor(new Run({ id: "cut", journal }));
    const params = {
      model: "gpt-test",
      messages: [{ role: "user" as const, content: "stream it" }],
      stream: true as const,
    };
    const s = await ai.chat.completions.create(params);
    const it = s[Symbol.asyncIterator]();
    await it.next();
    const pending = it.next().catch(() => undefined);
    await new Promise((r) => setTimeout(r, 50)); // the SDK's read waits on the stall
    await guardedStream(s).return();
    await pending;
    await it.return?.();
    fs.server.resetStats();
    const again = clientFor(new Run({ id: "cut", journal }));
    let text = "";
    for await (const c of await again.chat.completions.create(params))
      text += c.choices[0]?.delta.content ?? "";
    expect(text).toBe(TEXT);
    expect(fs.requests()).toBe(1); // asked for live: the cut stream was no answer
  });

  it("a run that asks for something else at a place: the journal is cut there, the run goes on live", async () => {
    const journal = make();
    await agent(new Run({ id: "d", journal }));
    fs.server.resetStats();
    const changed = new Run({ id: "d", journal });
    await agent(changed, "something else");
    expect(changed.stats).toMatchObject({ callsReplayed: 1, journalCuts: 1 });
    expect(fs.requests()).toBe(2); // the changed call and the one after it
    fs.server.resetStats();
    const third = new Run({ id: "d", journal });
    await agent(third, "something else"); // the new way is what the journal holds now
    expect(third.stats).toMatchObject({ callsReplayed: 3, journalCuts: 0 });
    expect(fs.requests()).toBe(0);
  });

  it('divergence: "fail" throws JournalDivergenceError naming the place', async () => {
    const journal = make();
    await agent(new Run({ id: "f", journal }));
    const strict = new Run({ id: "f", journal, divergence: "fail" });
    const error = await agent(strict, "something else").catch((e: unknown) => e);
    const cause = (error as { cause?: unknown }).cause ?? error;
    expect(cause).toBeInstanceOf(JournalDivergenceError);
    expect(String(cause)).toMatch(/run "f" went another way on resume: its call #2 \(model\)/);
  });

  it("a call made inside a step is the step's: not journaled twice", async () => {
    const journal = make();
    const run = new Run({ id: "s", journal });
    const ai = clientFor(run);
    const ask = () =>
      ai.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "x" }] });
    await run.step("plan", async () => (await ask()).id);
    await ask();
    const steps = (await journal.steps("s")).map((s) => s.step);
    expect(steps).toEqual(["plan", "#000001"]);
    fs.server.resetStats();
    const again = new Run({ id: "s", journal });
    const ai2 = clientFor(again);
    await again.step("plan", async () => "not run");
    await ai2.chat.completions.create({
      model: "gpt-test",
      messages: [{ role: "user", content: "x" }],
    });
    expect(fs.requests()).toBe(0);
    expect(again.stats).toMatchObject({ stepsReplayed: 1, callsReplayed: 1, journalCuts: 0 });
  });
});

describe("the AI SDK middleware and guardTool in a journaled run", () => {
  const modelFor = (run: Run) =>
    wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: KEY }).chat("gpt-test"),
      middleware: breakwaterMiddleware({ policy: testPolicy().p, run }),
    });

  it("generateText and streamText answered from the journal: the same text, parts and usage, no request", async () => {
    const journal = new MemoryJournal();
    const go = async (run: Run) => {
      const g = await generateText({ model: modelFor(run), prompt: "one", maxRetries: 0 });
      const s = streamText({ model: modelFor(run), prompt: "two", maxRetries: 0 });
      const parts: string[] = [];
      for await (const p of s.fullStream) parts.push(p.type);
      return {
        g: g.text,
        when: g.response.timestamp instanceof Date,
        s: await s.text,
        usage: await s.usage,
        parts,
      };
    };
    const first = await go(new Run({ id: "ai", journal }));
    fs.server.resetStats();
    const again = new Run({ id: "ai", journal });
    expect(await go(again)).toEqual(first);
    expect(first.when).toBe(true); // a recorded Date comes back a Date
    expect(fs.requests()).toBe(0);
    expect(again.stats.callsReplayed).toBe(2);
  });

  it("a guarded tool's result comes from the journal: the tool does not run again", async () => {
    const journal = new MemoryJournal();
    let ran = 0;
    const charge = guardTool(
      async (args: { cents: number }) => {
        ran++;
        return { charged: args.cents, receipt: `r${ran}` };
      },
      { name: "charge", effect: "idempotent" },
    );
    const first = new Run({ id: "t", journal });
    const a = await charge({ cents: 5 }, { run: first });
    const again = new Run({ id: "t", journal });
    expect(await charge({ cents: 5 }, { run: again })).toEqual(a);
    expect([ran, again.stats.callsReplayed]).toEqual([1, 1]);
    // A model call and a tool call share one order: the places are the run's.
    expect((await journal.steps("t")).map((s) => s.step)).toEqual(["#000001"]);
  });
});
