import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { GoogleGenAI } from "@google/genai";
import { ChatOpenAI } from "@langchain/openai";
import { Agent as MastraAgent } from "@mastra/core/agent";
import { Agent, Runner, retryPolicies } from "@openai/agents";
import { createAgent, modelFallbackMiddleware, modelRetryMiddleware } from "langchain";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { audit } from "../../src/audit/audit.ts";
import { parseLayers } from "../../src/cli/audit.ts";
import { agentMiddleware } from "../../src/providers/langchain.ts";
import { ownAgentRetries, withBreakwater } from "../../src/providers/openai.ts";

describe("audit", () => {
  it("worked example W1: caller 2 × decorator 3 × SDK 5 = 30 requests per logical call", () => {
    const r = audit([
      { name: "caller", attempts: 2 },
      { name: "decorator", attempts: 3, backoff: { baseMs: 1_000, jitter: "none" } },
      {
        name: "java-genai",
        attempts: 5,
        backoff: { baseMs: 1_000, capMs: 60_000, jitter: "up-to-2x" },
      },
    ]);
    expect(r.worstCaseRequests).toBe(30);
    // decorator waits (1 + 2 s) per caller attempt; the SDK's (2+4+8+16 s) per decorator attempt.
    expect(r.layers.map((l) => l.worstWaitMs)).toEqual([0, 3_000, 30_000]);
    expect(r.worstCaseWaitMs).toBe(2 * 3_000 + 6 * 30_000);
  });

  it("reads the SDKs' own retries off real clients and flags them", () => {
    const hidden = audit([{ name: "mine", attempts: 3 }], {
      openai: new OpenAI({ apiKey: "k" }),
      google: new GoogleGenAI({ apiKey: "k", httpOptions: { retryOptions: { attempts: 5 } } }),
      aiSdk: {},
    });
    expect(hidden.worstCaseRequests).toBe(3 * 3 * 5 * 3);
    expect(hidden.warnings.join("\n")).toMatch(/openai retries on its own \(maxRetries 2\)/);
    expect(hidden.warnings.join("\n")).toMatch(/@google\/genai retries on its own \(5 attempts\)/);
    expect(hidden.warnings.join("\n")).toMatch(/pass maxRetries: 0 to generateText\/streamText/);
    // The wrapped client is breakwater's layer itself: its policy's attempts, said by name.
    const clean = audit([], {
      openai: withBreakwater(new OpenAI({ apiKey: "k" }), { policy: { maxAttempts: 4 } }),
      google: new GoogleGenAI({ apiKey: "k" }),
      aiSdk: { maxRetries: 0 },
    });
    expect(clean.warnings).toEqual([]);
    expect(clean.layers.map((l) => [l.name, l.attempts])).toEqual([
      ["breakwater (openai.withBreakwater)", 4],
      ["google", 1],
      ["ai-sdk", 1],
    ]);
    expect(clean.worstCaseRequests).toBe(4);
  });

  it("reads the frameworks off the live objects: Agents SDK runners and agents, createAgent, streamRetries", () => {
    const retry = { maxRetries: 4, policy: retryPolicies.httpStatus([503]) };
    const runner = new Runner({ modelSettings: { retry } });
    const agents = audit([], {
      openai: withBreakwater(new OpenAI({ apiKey: "k" })),
      agents: runner,
    });
    expect(agents.worstCaseRequests).toBe(5 * 3);
    expect(agents.warnings.join("\n")).toMatch(
      /runner\.config\.modelSettings\.retry retries a model call 4 times.*ownAgentRetries/,
    );
    expect(audit([], { agents: ownAgentRetries(runner) }).worstCaseRequests).toBe(1);
    const helper = new Agent({ name: "h", modelSettings: { retry: { ...retry, maxRetries: 1 } } });
    const lead = new Agent({ name: "lead", handoffs: [helper] });
    expect(audit([], { agents: lead }).layers.map((l) => l.name)).toEqual([
      "agents-sdk agent.handoffs[0].modelSettings.retry",
    ]);

    const model = new ChatOpenAI({ model: "gpt-4o", apiKey: "k" });
    const stacked = createAgent({
      model,
      middleware: [modelRetryMiddleware(), modelFallbackMiddleware(model)],
    });
    const found = audit([], { langchainAgent: stacked });
    expect(found.layers.map((l) => [l.name, l.attempts])).toEqual([
      ["langchain modelRetryMiddleware", 3],
      ["langchain modelFallbackMiddleware", 1],
      ["langchain", 7],
    ]);
    expect(found.warnings.join("\n")).toMatch(/agentMiddleware\(\) from breakwater\/langchain/);
    const owned = createAgent({
      model,
      middleware: [agentMiddleware({ policy: { maxAttempts: 3 } })],
    });
    const mine = audit([], { langchainAgent: owned });
    expect([mine.warnings, mine.worstCaseRequests]).toEqual([[], 3]);

    const mastra = (o: object) =>
      audit([], {
        mastra: new MastraAgent({
          id: "a",
          name: "a",
          instructions: "x",
          model: "openai/gpt-5",
          ...o,
        }),
      });
    expect(mastra({}).layers).toEqual([]); // maxRetries 0 by default
    const two = mastra({ maxRetries: 2 });
    expect([two.worstCaseRequests, two.worstCaseWaitMs]).toEqual([3, 3_000]);
    expect(two.warnings.join("\n")).toMatch(/Mastra's Agent retries a failed model call 2 times/);
    const list = mastra({
      model: [
        { model: "openai/gpt-5", maxRetries: 1 },
        { model: "openai/gpt-4o", maxRetries: 3 },
      ],
    });
    expect(list.layers.map((l) => [l.name, l.attempts])).toEqual([["mastra Agent maxRetries", 4]]);

    const streams = audit([], { aiSdk: { maxRetries: 0, streamRetries: 2 } });
    expect(streams.worstCaseRequests).toBe(3);
    expect(streams.warnings.join("\n")).toMatch(/leave streamRetries unset/);
  });

  it("validates its input", () => {
    expect(() => audit([{ name: "x", attempts: 0 }])).toThrow(
      /"layers\[0\].attempts" must be an integer >= 1; got 0/,
    );
    expect(() => parseLayers("caller:two")).toThrow(/name:attempts/);
  });

  it("runs as breakwater audit", async () => {
    const run = promisify(execFile);
    const r = await run(process.execPath, [
      "src/cli/main.ts",
      "audit",
      "--layers",
      "caller:2,decorator:3,sdk:5",
      "--ai-sdk-max-retries",
      "0",
    ]);
    expect(r.stdout).toMatch(/2 × 3 × 5 × 1 = 30 requests per logical call/); // the AI SDK, retries off, is one attempt
    const flagged = await run(process.execPath, [
      "src/cli/main.ts",
      "audit",
      "--layers",
      "app:3",
      "--openai-max-retries",
      "2",
    ]).catch((e) => e);
    expect(flagged.code).toBe(1);
    expect(flagged.stdout).toMatch(/warning: openai retries on its own/);
  });
});
