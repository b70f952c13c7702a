import { createOpenAI } from "@ai-sdk/openai";
import { Agent } from "@mastra/core/agent";
import { noopLogger } from "@mastra/core/logger";
import { createTool } from "@mastra/core/tools";
import { APICallError, type LanguageModelMiddleware, wrapLanguageModel } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { MemoryJournal } from "../../src/run/journal.ts";
import { Run } from "../../src/run/run.ts";
import { guardTool } from "../../src/tools/guard-tool.ts";
import { announcedThenCut, TEXT, testPolicy, useFaultServer, useWarnings } from "./fixture.ts";

// Mastra (@mastra/core) agents over a model wrapped with breakwaterMiddleware, the way
// Mastra's docs hand an agent an AI SDK model: Mastra's own `maxRetries` loop, its
// streams and its per-run prompt stamps against breakwater's one layer.
const fs = useFaultServer();
const warnings = useWarnings();
const ARGS = '{"cents":5}';

type MastraModel = ConstructorParameters<typeof Agent>[0]["model"];

/** Every prompt the model was asked, as Mastra built it (a spy outside breakwater). */
const prompts: unknown[] = [];
const spy: LanguageModelMiddleware = {
  specificationVersion: "v4",
  transformParams: async ({ params }) => {
    prompts.push(params.prompt);
    return params;
  },
};

interface AgentOpts {
  run?: Run;
  maxRetries?: number;
  ran?: { n: number };
  attemptTimeoutMs?: number;
}

function agentFor(opts: AgentOpts = {}) {
  const t = testPolicy(opts.attemptTimeoutMs ? { attemptTimeoutMs: opts.attemptTimeoutMs } : {});
  const charge = guardTool(
    async (args: { cents: number }) => {
      if (opts.ran) opts.ran.n++;
      return { charged: args.cents };
    },
    { name: "charge", effect: "idempotent" },
  );
  const agent = new Agent({
    id: "shop",
    name: "shop",
    instructions: "charge what is asked",
    // Mastra types models by the @ai-sdk/provider it bundles (4.0.17), older than ai 7's.
    model: wrapLanguageModel({
      model: createOpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }).chat("gpt-test"),
      middleware: [spy, breakwaterMiddleware({ policy: t.p, ...(opts.run && { run: opts.run }) })],
    }) as unknown as MastraModel,
    tools: {
      charge: createTool({
        id: "charge",
        description: "charge cents",
        inputSchema: z.object({ cents: z.number() }),
        execute: async (input) => charge(input, opts.run ? { run: opts.run } : {}),
      }),
    },
    ...(opts.maxRetries !== undefined && { maxRetries: opts.maxRetries }),
  });
  agent.__registerPrimitives({ logger: noopLogger }); // Mastra logs each upstream error; the tests read them
  return { agent, ...t };
}

async function streamed(agent: Agent) {
  const s = await agent.stream("charge 5", { maxSteps: 3, onError: () => {} });
  let text = "";
  let thrown: unknown;
  try {
    for await (const c of s.textStream) text += c;
  } catch (e) {
    thrown = e;
  }
  return { text, error: thrown ?? (await s.error) };
}

describe("Mastra's agent loop over breakwaterMiddleware: one layer", () => {
  it("Agent({ maxRetries: 2 }) under a constant 503 sends maxAttempts requests, not 9", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const { agent, gaveUp } = agentFor({ maxRetries: 2 });
    const e = await agent.generate("hi").catch((x: unknown) => x);
    // Mastra wraps the give-up; the APICallError inside says it is not to be retried.
    const cause = APICallError.isInstance(e) ? e : (e as { cause?: unknown }).cause;
    expect(APICallError.isInstance(cause) && cause.isRetryable).toBe(false);
    expect(fs.requests()).toBe(3);
    expect(gaveUp).toHaveLength(1);
    expect(ledgerOf(cause)?.attempts).toHaveLength(3);
  });

  it("a timeout give-up (not an APICallError, which Mastra retries) is final: Mastra's retry sends nothing, and is named once", async () => {
    fs.script({ rules: [{ headersDelayMs: 400 }] });
    const { agent } = agentFor({ maxRetries: 1, attemptTimeoutMs: 100 });
    const e = await agent.generate("hi").catch((x: unknown) => x);
    expect(reasonOf(e)).toBe("attempt-timeout");
    expect(fs.requests()).toBe(3); // not 3 x 2
    const said = await warnings.settled();
    const again = "(Mastra's Agent maxRetries) asked again";
    expect(said.filter((w) => w.includes(again))).toHaveLength(1);
  });

  it("agent.stream with maxRetries: 2 under a constant 503: 3 requests, the error reaches the reader", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const { agent } = agentFor({ maxRetries: 2 });
    const { text, error } = await streamed(agent);
    expect(text).toBe("");
    expect(error).toBeDefined();
    expect(fs.requests()).toBe(3);
  });

  it("a stream cut after content is shown once: Mastra does not ask again", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    const { agent } = agentFor({ maxRetries: 2 });
    const { text, error } = await streamed(agent);
    expect(fs.requests()).toBe(1);
    expect(TEXT.startsWith(text) && text.length > 0 && text !== TEXT).toBe(true);
    expect(error).toBeDefined();
  });

  it("a cut after a tool call's announcement, before its arguments, is retried: the tool runs once, with its arguments", async () => {
    fs.script({
      rules: [
        announcedThenCut(ARGS),
        { requests: [2, 2], text: "", toolCalls: [{ name: "charge", arguments: ARGS }] },
      ],
    });
    const ran = { n: 0 };
    const { agent } = agentFor({ ran });
    const { text, error } = await streamed(agent);
    expect(error).toBeUndefined();
    expect([fs.requests(), ran.n, text]).toEqual([3, 1, TEXT]); // cut, tool call, answer
  });
});

describe("a journaled Run of a Mastra agent resumes", () => {
  const toolThenText = (then: object = {}) =>
    fs.script({
      rules: [
        { requests: [1, 1], text: "", toolCalls: [{ name: "charge", arguments: ARGS }] },
        { requests: [2, 2], ...then },
      ],
    });

  it.each(["generate", "stream"] as const)(
    "%s: started again under the same id, nothing is sent and the tool does not run again, though Mastra stamps every prompt part",
    async (mode) => {
      const journal = new MemoryJournal();
      const ran = { n: 0 };
      const go = async (run: Run) => {
        const { agent } = agentFor({ run, ran });
        if (mode === "generate") return (await agent.generate("charge 5", { maxSteps: 3 })).text;
        return (await streamed(agent)).text;
      };
      toolThenText();
      prompts.length = 0;
      expect(await go(new Run({ id: mode, journal }))).toBe(TEXT);
      expect([fs.requests(), ran.n]).toEqual([2, 1]);
      // What Mastra stamps per run: the reason the request's name must leave it out.
      expect(JSON.stringify(prompts[0])).toMatch(/"mastra":\{"createdAt":\d+\}/);
      fs.server.resetStats();
      const again = new Run({ id: mode, journal });
      expect(await go(again)).toBe(TEXT);
      expect([fs.requests(), ran.n, again.stats.callsReplayed]).toEqual([0, 1, 3]);
    },
  );

  it("a run that failed at its second model call sends only that call when started again", async () => {
    const journal = new MemoryJournal();
    const ran = { n: 0 };
    const go = (run: Run) => agentFor({ run, ran }).agent.generate("charge 5", { maxSteps: 3 });
    fs.script({
      rules: [
        { requests: [1, 1], text: "", toolCalls: [{ name: "charge", arguments: ARGS }] },
        { requests: [2, 4], status: 503 },
      ],
    });
    await expect(go(new Run({ id: "cut", journal }))).rejects.toBeDefined();
    expect([fs.requests(), ran.n]).toEqual([4, 1]); // the tool call, then 3 attempts
    fs.script({});
    fs.server.resetStats();
    const again = new Run({ id: "cut", journal });
    expect((await go(again)).text).toBe(TEXT);
    expect([fs.requests(), ran.n, again.stats.callsReplayed]).toEqual([1, 1, 2]);
  });
});
