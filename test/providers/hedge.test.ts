import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { AdaptiveAdmission } from "../../src/core/admission.ts";
import type { Ledger } from "../../src/core/ledger.ts";
import { withBreakwater as anthropic } from "../../src/providers/anthropic.ts";
import { withBreakwater as openai } from "../../src/providers/openai.ts";
import { guardTool } from "../../src/tools/guard-tool.ts";
import { TEXT, testPolicy, useFaultServer } from "./fixture.ts";

// Hedged first tokens (docs/architecture.md, rule 21) through the real SDKs: the first
// request stalls before its first token; the hedge answers, the stalled one is closed.
const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "three little words" }];
const HEDGE = { hedge: { afterMs: 150 } };

/** The first request of the route stalls: before its headers (JSON) or its first token. */
const stallFirst = (route: "openai" | "anthropic", json = false) =>
  fs.script({
    rules: [
      json
        ? { route, requests: [1, 1], headersDelayMs: 10_000 }
        : { route, requests: [1, 1], stream: { after: 0, action: "stall" } },
    ],
  });

/** The two arrivals: the stalled one closed within 250 ms of `contentAt` (epoch ms; it would stall 10 s, and a loaded 2-core machine hears a close 50+ ms late). */
async function stalledClosedBy(contentAt: number) {
  // The server hears the close a moment later: wait for it (up to a second).
  for (let i = 0; i < 100 && fs.server.stats().timeline[0]?.closedAt === undefined; i++)
    await new Promise((r) => setTimeout(r, 10));
  const t = fs.server.stats().timeline;
  expect(t).toHaveLength(2);
  const closedAt = fs.server.startedAt + t[0]!.closedAt!;
  expect(closedAt - contentAt).toBeLessThan(250);
  return closedAt;
}

function lostAndWon(ledger: Ledger) {
  expect(ledger.attempts.map((a) => [a.attempt, a.outcome, a.hedged])).toEqual([
    [1, "failed", "lost"],
    [2, "ok", "won"],
  ]);
  // The hedge went 150 ms after the first attempt began (the policy's clock).
  const [first, hedge] = [ledger.attempts[0]!, ledger.attempts[1]!];
  expect(hedge.startedAt - first.startedAt).toBeGreaterThanOrEqual(149);
  // The loser's prompt (estimated from the request) is wasted.
  expect(ledger.wasted.inputTokens).toBeGreaterThan(0);
}

describe("hedged first tokens through the real SDKs (fault server)", () => {
  // One call of each kind first: what is measured below is the hedge, not a cold start.
  beforeAll(async () => {
    fs.script({});
    const oa = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }));
    const an = anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test" }));
    for await (const _ of await oa.chat.completions.create({ model: "w", messages, stream: true }));
    await oa.chat.completions.create({ model: "w", messages });
    const s = await an.messages.create({ model: "w", max_tokens: 9, messages, stream: true });
    for await (const _ of s);
  });

  it("openai stream: the hedge's tokens reach the consumer; the stalled socket closes at once", async () => {
    stallFirst("openai");
    const { p, ledgers } = testPolicy(HEDGE);
    const client = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: p,
    });
    const stream = await client.chat.completions.create({
      model: "gpt-test",
      messages,
      stream: true,
    });
    let text = "";
    let firstAt: number | undefined;
    for await (const c of stream) {
      const piece = c.choices[0]?.delta.content ?? "";
      if (piece !== "") firstAt ??= Date.now();
      text += piece;
    }
    expect(text).toBe(TEXT);
    await stalledClosedBy(firstAt!);
    lostAndWon(ledgers[0]!);
  });

  it("anthropic stream: the same", async () => {
    stallFirst("anthropic");
    const { p, ledgers } = testPolicy(HEDGE);
    const client = anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test" }), {
      policy: p,
    });
    const stream = await client.messages.create({
      model: "claude-test",
      max_tokens: 100,
      messages,
      stream: true,
    });
    let text = "";
    let firstAt: number | undefined;
    for await (const e of stream)
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") {
        firstAt ??= Date.now();
        text += e.delta.text;
      }
    expect(text).toBe(TEXT);
    await stalledClosedBy(firstAt!);
    lostAndWon(ledgers[0]!);
  });

  it("openai JSON: raced on the headers; the hedge's answer is the SDK's", async () => {
    stallFirst("openai", true);
    const { p, ledgers } = testPolicy(HEDGE);
    const client = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: p,
    });
    const r = await client.chat.completions.create({ model: "gpt-test", messages });
    const answeredAt = Date.now();
    expect(r.choices[0]?.message.content).toBe(TEXT);
    await stalledClosedBy(answeredAt);
    lostAndWon(ledgers[0]!);
  });

  it("no hedge when the admission refuses: one request, however long it stalls", async () => {
    fs.script({ rules: [{ route: "openai", requests: [1, 1], headersDelayMs: 600 }] });
    const admission = new AdaptiveAdmission({ random: () => 0.99 });
    for (let i = 0; i < 30; i++) admission.onFailure({ kind: "overloaded", retryable: true });
    const { p } = testPolicy({ ...HEDGE, budget: admission });
    const client = openai(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: p,
    });
    const r = await client.chat.completions.create({ model: "gpt-test", messages });
    expect(r.choices[0]?.message.content).toBe(TEXT);
    expect(fs.server.stats().requests).toBe(1);
  });

  it("no hedge for a tool call with effects: the slow charge runs once", async () => {
    fs.script({ rules: [{ route: "tools", workMs: 600 }] });
    const charge = guardTool(
      async (args: { order: number }, tc) => {
        const res = await fetch(`${fs.server.url}/tools/charge`, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": tc.idempotencyKey },
          body: JSON.stringify(args),
          signal: tc.signal,
        });
        return res.json();
      },
      { name: "charge", effect: "idempotent", policy: HEDGE },
    );
    await charge({ order: 7 });
    expect(fs.server.stats().tools.executed).toBe(1);
    expect(fs.server.stats().requests).toBe(1);
  });
});
