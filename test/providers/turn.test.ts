import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import { callOptions, withBreakwater } from "../../src/providers/openai.ts";
import { Run } from "../../src/run/run.ts";
import { onFaultServer } from "../helpers.ts";

// A deadline is a budget to spend (docs/architecture.md, rule 1): the official openai client,
// wrapped, against the fault server answering half its requests 503 (seeded: the same
// requests fail every run). A turn of four calls in a Run of 60 s is answered where a fixed
// cap of 3 attempts gives up on one of its calls.
const SCRIPT = { seed: 3, rules: [{ probability: 0.5, status: 503 }] };
const messages = [{ role: "user" as const, content: "one turn, four calls" }];

/** Four calls in a row, as an agent's turn makes them; the attempts of each. */
async function turn(url: string, maxAttempts?: number) {
  // Short waits, so the test takes milliseconds; the attempt cap is the default's.
  const p = policy({ backoff: { baseMs: 5, capMs: 20 }, ...(maxAttempts && { maxAttempts }) });
  const ai = withBreakwater(new OpenAI({ baseURL: `${url}/v1`, apiKey: "sk-test-0000" }), {
    policy: p,
  });
  const run = new Run({ deadlineMs: 60_000 });
  const attempts: number[] = [];
  try {
    for (let i = 0; i < 4; i++) {
      const r = await ai.chat.completions.create({ model: "m", messages }, callOptions({ run }));
      expect(r?.choices[0]?.message.content).toMatch(/fault server/);
      attempts.push(run.stats.attempts - attempts.reduce((a, b) => a + b, 0));
    }
    return { ok: true as const, attempts, requests: run.stats.attempts };
  } catch (e) {
    const sent = ledgerOf(e)?.attempts.length ?? 0;
    return { ok: false as const, attempts: [...attempts, sent], reason: reasonOf(e) };
  }
}

describe("a turn of four calls against a half-failing upstream, in a Run of 60 s", () => {
  it("is answered: one call needs more than three attempts, which a fixed cap of 3 would have refused", async () => {
    const answered = await onFaultServer(async (server) => {
      server.setScript(SCRIPT);
      const r = await turn(server.url);
      expect(server.stats().requests).toBe(r.ok ? r.requests : -1);
      return r;
    });
    expect(answered.ok).toBe(true);
    expect(Math.max(...answered.attempts)).toBeGreaterThan(3);
    const capped = await onFaultServer(async (server) => {
      server.setScript(SCRIPT);
      return turn(server.url, 3);
    });
    expect(capped).toMatchObject({ ok: false, reason: "attempts-exhausted" });
    console.log(
      `a 4-call turn on a 50%-503 upstream: answered with ${answered.attempts.join(" + ")} = ${answered.ok && answered.requests} requests; with 3 attempts a call, given up at call ${capped.attempts.length} after ${capped.attempts.reduce((a, b) => a + b, 0)}`,
    );
  });
});
