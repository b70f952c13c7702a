/**
 * The OpenAI Agents SDK (@openai/agents, the version npm serves) over a wrapped client,
 * against the fault server: breakwater is the one retry layer of its model calls, the
 * runner's own `modelSettings.retry` neutralised or refused.
 */
import { Agent, OpenAIProvider, Runner, retryPolicies, setTracingDisabled } from "@openai/agents";
import OpenAI from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { ownAgentRetries, withBreakwater } from "../../src/providers/openai.ts";
import { MemoryJournal } from "../../src/run/journal.ts";
import { Run } from "../../src/run/run.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
beforeAll(() => setTracingDisabled(true)); // no exporter calling out from the tests

/** A runner whose model calls go through a wrapped client, as its README says. */
function runnerFor(options: { retry?: boolean; own?: boolean; run?: Run; chat?: boolean } = {}) {
  const t = testPolicy();
  const client = withBreakwater(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
    policy: t.p,
    ...(options.run && { run: options.run }),
  });
  // The SDK's backoff shortened, so its 4 retries take no seconds.
  const retry = {
    maxRetries: 4,
    backoff: { initialDelayMs: 5, maxDelayMs: 5 },
    policy: retryPolicies.any(retryPolicies.httpStatus([503]), retryPolicies.networkError()),
  };
  const runner = new Runner({
    modelProvider: new OpenAIProvider({ openAIClient: client, useResponses: !options.chat }),
    ...(options.retry && { modelSettings: { retry } }),
  });
  return { runner: options.own ? ownAgentRetries(runner) : runner, t };
}
const agent = () =>
  new Agent({ name: "helper", instructions: "Answer briefly.", model: "gpt-test" });

describe("the Agents SDK's runner over a wrapped client", () => {
  it("a healthy run: one request, the fault server's text as the final output", async () => {
    fs.script({});
    const { runner } = runnerFor();
    const r = await runner.run(agent(), "hi");
    expect(r.finalOutput).toBe(TEXT);
    expect(fs.requests()).toBe(1);
  });

  it("an endless 503: the policy's 3 requests, the SDK's error told why", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const { runner } = runnerFor();
    const error = await runner.run(agent(), "hi").catch((e: unknown) => e);
    expect(reasonOf(error)).toBe("attempts-exhausted");
    expect(fs.requests()).toBe(3);
  });

  it("modelSettings.retry turned on (4 retries): 15 requests; ownAgentRetries: 3, said once", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const stacked = runnerFor({ retry: true });
    await stacked.runner.run(agent(), "hi").catch(() => {});
    expect(fs.requests()).toBe(15);
    fs.server.resetStats();
    const warned: string[] = [];
    const listen = (w: Error) => void warned.push(w.message);
    process.on("warning", listen);
    const owned = runnerFor({ retry: true, own: true });
    const error = await owned.runner.run(agent(), "hi").catch((e: unknown) => e);
    await new Promise((r) => setImmediate(r));
    process.off("warning", listen);
    expect(fs.requests()).toBe(3);
    expect(ledgerOf(error)?.attempts).toHaveLength(3);
    expect(warned.join("\n")).toMatch(
      /runner\.config\.modelSettings\.retry retries a failed model call 4 times/,
    );
  });

  it("an agent's own retry settings and its handoffs' are owned too; refuse throws naming the place", () => {
    const retry = { maxRetries: 2, policy: retryPolicies.networkError() };
    const helper = new Agent({ name: "helper", modelSettings: { retry } });
    const lead = new Agent({ name: "lead", modelSettings: { retry }, handoffs: [helper] });
    ownAgentRetries(lead);
    expect(lead.modelSettings.retry?.policy).not.toBe(retry.policy);
    expect(helper.modelSettings.retry?.policy).not.toBe(retry.policy);
    const again = new Agent({
      name: "lead",
      handoffs: [new Agent({ name: "h", modelSettings: { retry } })],
    });
    expect(() => ownAgentRetries(again, { found: "refuse" })).toThrow(
      /ownAgentRetries: option "agent\.handoffs\[0\]\.modelSettings\.retry" must be no policy/,
    );
    expect(() => ownAgentRetries(again, { found: "always" as never })).toThrow(/"found".*"always"/);
  });

  it.each([
    ["Responses", false],
    ["Chat Completions", true],
  ])("a streamed run (%s) cut after content: the text shown once, one request", async (_, chat) => {
    fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    const { runner } = runnerFor({ retry: true, own: true, chat });
    const s = await runner.run(agent(), "hi", { stream: true });
    let text = "";
    const error = await (async () => {
      for await (const e of s) {
        if (e.type === "raw_model_stream_event" && e.data.type === "output_text_delta")
          text += e.data.delta;
      }
      await s.completed;
    })().catch((e: unknown) => e);
    expect(text).toBe("The fault server ");
    expect(error ?? s.error).toBeTruthy();
    expect(fs.requests()).toBe(1);
  });

  it.each([
    ["Responses", false],
    ["Chat Completions", true],
  ])(
    "a journaled run (%s) started again: every finished model call from the journal",
    async (_, chat) => {
      fs.script({});
      const journal = new MemoryJournal();
      const go = async (run: Run, stream: boolean) => {
        const { runner } = runnerFor({ run, chat });
        if (!stream) return (await runner.run(agent(), "hi")).finalOutput;
        const s = await runner.run(agent(), "hi again", { stream: true });
        for await (const _ of s);
        await s.completed;
        return s.finalOutput;
      };
      const first = new Run({ id: `agents-${chat}`, journal });
      const answers = [await go(first, false), await go(first, true)];
      fs.server.resetStats();
      const again = new Run({ id: `agents-${chat}`, journal });
      expect([await go(again, false), await go(again, true)]).toEqual(answers);
      expect(fs.requests()).toBe(0);
      expect(again.stats.callsReplayed).toBe(2);
    },
  );
});
