import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { BreakwaterError, reasonOf } from "../../src/core/errors.ts";
import type { AttemptContext } from "../../src/policy/call.ts";
import { fallback } from "../../src/policy/fallback.ts";
import { policy } from "../../src/policy/policy.ts";
import { pool } from "../../src/policy/pool.ts";
import { useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const messages = [{ role: "user" as const, content: "hi" }];

/** An upstream: the real openai client (its own retries off) asking for `model`; the
 * models asked for, in order, are recorded in `asked`. */
function upstream(name: string, model: string, asked: string[]) {
  const client = new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test", maxRetries: 0 });
  return {
    name,
    policy: policy(), // the defaults
    call: (ctx: AttemptContext) => {
      asked.push(model);
      return client.chat.completions.create({ model, messages }, { signal: ctx.signal });
    },
  };
}

describe("wait if short, switch if long: chains with the real openai client", () => {
  it("a pool that meets a 429 answers from the other deployment at once, and cools the first", async () => {
    fs.script({ rules: [{ model: "dep-a", status: 429, error: "rate_limit", retryAfter: 10 }] });
    const asked: string[] = [];
    const p = pool([upstream("a", "dep-a", asked), upstream("b", "dep-b", asked)]);
    const started = performance.now();
    const first = await p.execute();
    expect(first.choices[0]?.message.content).toBeTruthy();
    // Not a 10 s wait at deployment a: on to b at once (real time, generous for a busy box).
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(asked).toEqual(["dep-a", "dep-b"]);
    // Deployment a cools for its Retry-After: the next call goes straight to b.
    await p.execute();
    expect(asked).toEqual(["dep-a", "dep-b", "dep-b"]);
    expect(p.cooldowns().a).toBeGreaterThan(Date.now() + 5_000);
  });

  it("a fallback whose deadline is shorter than the primary's Retry-After answers from the secondary", async () => {
    fs.script({ rules: [{ model: "primary", status: 429, error: "rate_limit", retryAfter: 2 }] });
    const asked: string[] = [];
    const chain = fallback(
      [upstream("primary", "primary", asked), upstream("secondary", "secondary", asked)],
      { deadlineMs: 1_000 },
    );
    const started = performance.now();
    const answer = await chain.execute();
    expect(answer.choices[0]?.message.content).toBeTruthy();
    expect(asked).toEqual(["primary", "secondary"]);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("when every upstream asks to wait past the deadline, the call ends at once with reason deadline", async () => {
    fs.script({ rules: [{ status: 429, error: "rate_limit", retryAfter: 2 }] });
    const asked: string[] = [];
    const chain = fallback(
      [upstream("primary", "primary", asked), upstream("secondary", "secondary", asked)],
      { deadlineMs: 1_000 },
    );
    const started = performance.now();
    const e = await chain.execute().catch((x: unknown) => x);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(e).toBeInstanceOf(BreakwaterError);
    expect(reasonOf(e)).toBe("deadline");
    expect((e as BreakwaterError).cause).toBeInstanceOf(OpenAI.RateLimitError);
    expect(asked).toEqual(["primary", "secondary"]); // each asked once, neither waited 2 s
  });
});
