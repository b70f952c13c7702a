import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { withBreakwater as anthropicWith } from "../../src/providers/anthropic.ts";
import { withBreakwater as openaiWith } from "../../src/providers/openai.ts";
import { testPolicy, useFaultServer } from "./fixture.ts";

// What a stream cut after content cost: the provider billed its prompt and the words it
// sent. What it said (Anthropic's message_start carries the prompt's tokens) is booked; when
// it said nothing (OpenAI's usage chunk comes last), an estimate, marked as one, never 0.
const fs = useFaultServer();
const long = "tell me a story about a lighthouse keeper ".repeat(20);

/** The first attempt of a stream cut after three words, read to its end. */
async function cutAttempt(open: () => Promise<AsyncIterable<unknown>>) {
  fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
  const e = await (async () => {
    for await (const _ of await open());
  })().catch((x: unknown) => x);
  expect(reasonOf(e)).toBe("stream-interrupted");
  return { attempt: ledgerOf(e)!.attempts[0]!, ledger: ledgerOf(e)! };
}

describe("a stream cut after content is billed, never 0", () => {
  it("openai: nothing said before the cut, so an estimate: the prompt as the limiter sized it, the words shown", async () => {
    const c = openaiWith(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    const { attempt, ledger } = await cutAttempt(() =>
      c.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: long }],
        stream: true,
      }),
    );
    const billed = fs.server.stats().billed; // what the provider billed
    expect(attempt.usageEstimated).toBe(true);
    expect(attempt.usage!.inputTokens).toBeGreaterThan(billed.inputTokens / 3);
    expect(attempt.usage!.inputTokens).toBeLessThan(billed.inputTokens * 3);
    expect(attempt.usage!.outputTokens).toBeGreaterThan(0);
    expect(ledger.billed.inputTokens).toBe(attempt.usage!.inputTokens);
  });

  it("anthropic: what message_start said of the prompt is booked as it said, not estimated", async () => {
    const c = anthropicWith(new Anthropic({ baseURL: fs.server.url, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    const { attempt } = await cutAttempt(() =>
      c.messages.create({
        model: "m",
        max_tokens: 64,
        messages: [{ role: "user", content: long }],
        stream: true,
      }),
    );
    expect(attempt.usageEstimated).toBeUndefined();
    expect(attempt.usage!.inputTokens).toBe(fs.server.stats().billed.inputTokens);
  });
});
