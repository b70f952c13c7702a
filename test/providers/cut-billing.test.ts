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

describe("a stream cut after content is billed, never 0", () => {
  it("openai: nothing said before the cut, so an estimate: the prompt as the limiter sized it, the words shown", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    const c = openaiWith(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    const e = await (async () => {
      const s = await c.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: long }],
        stream: true,
      });
      for await (const _ of s);
    })().catch((x: unknown) => x);
    expect(reasonOf(e)).toBe("stream-interrupted");
    const [attempt] = ledgerOf(e)!.attempts;
    const billed = fs.server.stats().billed; // what the provider billed
    expect(attempt!.usageEstimated).toBe(true);
    expect(attempt!.usage!.inputTokens).toBeGreaterThan(billed.inputTokens / 3);
    expect(attempt!.usage!.inputTokens).toBeLessThan(billed.inputTokens * 3);
    expect(attempt!.usage!.outputTokens).toBeGreaterThan(0);
    expect(ledgerOf(e)!.billed.inputTokens).toBe(attempt!.usage!.inputTokens);
  });

  it("anthropic: what message_start said of the prompt is booked as it said, not estimated", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    const c = anthropicWith(new Anthropic({ baseURL: fs.server.url, apiKey: "k" }), {
      policy: testPolicy().p,
    });
    const e = await (async () => {
      const s = await c.messages.create({
        model: "m",
        max_tokens: 64,
        messages: [{ role: "user", content: long }],
        stream: true,
      });
      for await (const _ of s);
    })().catch((x: unknown) => x);
    expect(reasonOf(e)).toBe("stream-interrupted");
    const [attempt] = ledgerOf(e)!.attempts;
    expect(attempt!.usageEstimated).toBeUndefined();
    expect(attempt!.usage!.inputTokens).toBe(fs.server.stats().billed.inputTokens);
  });
});
