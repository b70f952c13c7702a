/**
 * The AI SDK middleware on the oldest the peer range claims: `ai` 7.0.0 with
 * `@ai-sdk/openai` 4.0.0 (both on `@ai-sdk/provider` 4.0.0, middleware specification v4),
 * installed as npm aliases. The same scenarios as on the latest (test/providers/ai-sdk.test.ts).
 */
import { readFileSync } from "node:fs";
import { createOpenAI } from "ai-sdk-openai-v4-0";
import { generateText, streamText, wrapLanguageModel } from "ai-v7-0";
import { describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { MemoryJournal } from "../../src/run/journal.ts";
import { Run } from "../../src/run/run.ts";
import { TEXT, testPolicy, useFaultServer } from "../providers/fixture.ts";

const fs = useFaultServer();
const version = (pkg: string): string =>
  JSON.parse(
    readFileSync(new URL(`../../node_modules/${pkg}/package.json`, import.meta.url), "utf8"),
  ).version;

const modelFor = (run?: Run) =>
  wrapLanguageModel({
    model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }).chat("gpt-test"),
    // The middleware is typed by today's @ai-sdk/provider; 4.0.0's is the same shape.
    middleware: breakwaterMiddleware({ policy: testPolicy().p, ...(run && { run }) }) as never,
  });

async function streamed(model: ReturnType<typeof modelFor>) {
  let text = "";
  try {
    for await (const part of streamText({ model, prompt: "hi", onError: () => {} }).fullStream) {
      if (part.type === "text-delta") text += part.text;
      if (part.type === "error") return { text, error: part.error };
    }
  } catch (error) {
    return { text, error };
  }
  return { text, error: undefined };
}

describe(`ai ${version("ai-v7-0")} with @ai-sdk/openai ${version("ai-sdk-openai-v4-0")}`, () => {
  it("are the oldest: 7.0.0 and 4.0.0", () => {
    expect([version("ai-v7-0"), version("ai-sdk-openai-v4-0")]).toEqual(["7.0.0", "4.0.0"]);
  });

  it("503 twice, then the answer: three requests", async () => {
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    expect((await generateText({ model: modelFor(), prompt: "hi" })).text).toBe(TEXT);
    expect(fs.requests()).toBe(3);
  });

  it("an endless 503 under the AI SDK's own default maxRetries: the policy's 3 requests, not 9", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const e = await generateText({ model: modelFor(), prompt: "hi" }).catch((x: unknown) => x);
    expect(ledgerOf(e)?.attempts).toHaveLength(3);
    expect(fs.requests()).toBe(3);
  });

  it("a stream cut before content is retried; one cut after content is shown once and ends as stream-interrupted", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "cut" } }] });
    expect(await streamed(modelFor())).toEqual({ text: TEXT, error: undefined });
    expect(fs.requests()).toBe(2);
    fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    fs.server.resetStats();
    const cut = await streamed(modelFor());
    expect(cut.text).toBe("The fault server ");
    expect(reasonOf(cut.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);
  });

  it("a journaled run started again answers both calls from the journal", async () => {
    const journal = new MemoryJournal();
    const go = async (run: Run) => ({
      g: (await generateText({ model: modelFor(run), prompt: "one" })).text,
      s: (await streamed(modelFor(run))).text,
    });
    const first = await go(new Run({ id: "old-ai", journal }));
    expect(first).toEqual({ g: TEXT, s: TEXT });
    fs.server.resetStats();
    const again = new Run({ id: "old-ai", journal });
    expect(await go(again)).toEqual(first);
    expect([fs.requests(), again.stats.callsReplayed]).toEqual([0, 2]);
  });
});
