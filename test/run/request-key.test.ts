import { createOpenAI } from "@ai-sdk/openai";
import { generateText, type LanguageModelMiddleware, wrapLanguageModel } from "ai";
import fc from "fast-check";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater } from "../../src/providers/openai.ts";
import { MemoryJournal } from "../../src/run/journal.ts";
import { RUN_STAMPS, unstampedJson } from "../../src/run/request-key.ts";
import { Run } from "../../src/run/run.ts";
import { testPolicy, useFaultServer } from "../providers/fixture.ts";

const fs = useFaultServer();
const KEY = "sk-test-000000000000";

describe("unstampedJson: the request as JSON, without what frameworks stamp per run", () => {
  it("is JSON.stringify for any value with no provider options or metadata in it", () => {
    const plain = fc
      .jsonValue()
      .filter((v) => !/"provider(Options|Metadata)"/.test(JSON.stringify(v) ?? ""));
    fc.assert(fc.property(plain, (v) => unstampedJson(v) === JSON.stringify(v)));
  });

  it("drops each stamp inside providerOptions and providerMetadata, at any depth; keeps it elsewhere", () => {
    fc.assert(
      fc.property(fc.constantFrom(...RUN_STAMPS), fc.string(), (stamp, value) => {
        const part = (v: string) => ({
          type: "text",
          text: "hi",
          [stamp]: "kept: not inside provider options",
          providerOptions: { mastra: { [stamp]: v, kept: 1 } },
        });
        const a = unstampedJson({ prompt: [{ content: [part(value)] }] });
        expect(a).toBe(unstampedJson({ prompt: [{ content: [part(`${value}x`)] }] }));
        expect(JSON.parse(a).prompt[0].content[0]).toEqual({
          type: "text",
          text: "hi",
          [stamp]: "kept: not inside provider options",
          providerOptions: { mastra: { kept: 1 } },
        });
      }),
    );
  });
});

/** A framework that stamps each prompt part, as Mastra stamps `providerOptions.mastra.createdAt`. */
const stamping: LanguageModelMiddleware = {
  specificationVersion: "v4",
  transformParams: async ({ params }) => ({
    ...params,
    prompt: params.prompt.map((m) =>
      m.role === "system"
        ? m
        : {
            ...m,
            content: m.content.map((p: object) => ({
              ...p,
              providerOptions: { mastra: { createdAt: performance.now() } },
            })),
          },
    ) as typeof params.prompt,
  }),
} as LanguageModelMiddleware;

describe("a journaled run resumes though its stack stamps each request per run", () => {
  const modelFor = (run: Run) =>
    wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: KEY }).chat("gpt-test"),
      middleware: [stamping, breakwaterMiddleware({ policy: testPolicy().p, run })],
    });

  it("the AI SDK middleware: createdAt on every prompt part is not part of the request's name", async () => {
    const journal = new MemoryJournal();
    const go = async (run: Run) =>
      (await generateText({ model: modelFor(run), prompt: "one", maxRetries: 0 })).text;
    const first = await go(new Run({ id: "stamped", journal }));
    fs.server.resetStats();
    const again = new Run({ id: "stamped", journal });
    expect(await go(again)).toBe(first);
    expect(fs.requests()).toBe(0);
    expect(again.stats.callsReplayed).toBe(1);
  });

  it("requestKey: the fetch layer's request named without the app's own per-run field", async () => {
    const journal = new MemoryJournal();
    const requestKey = (r: Record<string, unknown>) => {
      const { metadata: _, ...body } = r.body as Record<string, unknown>;
      return { ...r, body };
    };
    const go = async (run: Run) => {
      const ai = withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: KEY }), {
        policy: testPolicy().p,
        run,
      });
      const r = await ai.chat.completions.create({
        model: "gpt-test",
        messages: [{ role: "user", content: "plan" }],
        metadata: { started: String(performance.now()) },
      });
      return r.choices[0]!.message.content;
    };
    await go(new Run({ id: "k", journal, requestKey }));
    fs.server.resetStats();
    await go(new Run({ id: "k", journal, requestKey }));
    expect(fs.requests()).toBe(0);
    const without = new Run({ id: "k", journal }); // the same field, no key: a new request
    await go(without);
    expect(fs.requests()).toBe(1);
    expect(without.stats.journalCuts).toBe(1);
  });

  it("requestKey that is not a function is refused by name", () => {
    expect(() => new Run({ requestKey: "metadata" as never })).toThrow(
      /requestKey.*a function.*"metadata"/,
    );
  });
});
