import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { RateLimiter } from "../../src/core/limiter.ts";
import { policy } from "../../src/policy/policy.ts";
import { withBreakwater as anthropicClient } from "../../src/providers/anthropic.ts";
import { withBreakwater as openaiClient } from "../../src/providers/openai.ts";
import { useFaultServer } from "./fixture.ts";

// Real time on loopback: the server refills 5 requests a second and answers every request
// with its headers; a burst of 15 calls takes about two seconds either way.
const fs = useFaultServer();
const LIMIT = { requestsPerMinute: 5, windowMs: 1000 };
const BURST = 15;

const clients: Record<string, (limiter?: RateLimiter | false) => () => Promise<unknown>> = {
  openai: (limiter?: RateLimiter | false) => {
    const ai = openaiClient(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test-0" }), {
      policy: policy({ limiter: limiter ?? false, budget: false, maxAttempts: 1 }),
    });
    return () =>
      ai.chat.completions.create({
        model: "gpt-test",
        max_tokens: 20,
        messages: [{ role: "user", content: "hi" }],
      });
  },
  anthropic: (limiter?: RateLimiter | false) => {
    const ai = anthropicClient(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-0" }), {
      policy: policy({ limiter: limiter ?? false, budget: false, maxAttempts: 1 }),
    });
    return () =>
      ai.messages.create({
        model: "claude-test",
        max_tokens: 20,
        messages: [{ role: "user", content: "hi" }],
      });
  },
};

const rejected = () => fs.server.stats().byRoute;

describe.each(Object.entries(clients))(
  "the rate limiter under the real %s client",
  (name, make) => {
    const route = name === "openai" ? "openai" : "anthropic";
    const count429 = () => rejected()[route]?.byOutcome["429"] ?? 0;

    it("learns the limits from the headers and sends a burst with no 429", async () => {
      fs.script({ rateLimit: LIMIT });
      const limiter = new RateLimiter();
      const call = make(limiter);
      await call(); // the first answer tells the limits
      expect(limiter.snapshot().requests?.capacity).toBe(5);
      const results = await Promise.allSettled(Array.from({ length: BURST }, call));
      expect(results.filter((r) => r.status === "rejected")).toEqual([]);
      expect(count429()).toBe(0);
      expect(fs.server.stats().requests).toBe(BURST + 1);
    });

    it("without a limiter (limiter: false), the same burst meets the limit (the control)", async () => {
      fs.script({ rateLimit: LIMIT });
      const call = make();
      await call();
      const results = await Promise.allSettled(Array.from({ length: BURST }, call));
      expect(results.filter((r) => r.status === "rejected").length).toBeGreaterThan(0);
      expect(count429()).toBeGreaterThan(0);
    });

    it("a 429's headers reach the limiter too: it learns the limit from the refusal", async () => {
      fs.script({ rateLimit: { requestsPerMinute: 2, windowMs: 60_000 } });
      const other = make(); // another process on the same key spends it
      await other();
      await other();
      const limiter = new RateLimiter();
      const e = await make(limiter)().catch((x: unknown) => x);
      expect((e as { status?: number }).status).toBe(429);
      const r = limiter.snapshot().requests!;
      expect(r.capacity).toBe(2);
      expect(r.level).toBeLessThan(0.01); // refilling since, at 2 a minute
      expect(limiter.tryAcquire({})).toBeUndefined(); // and holds the next call
    });

    it("a call that cannot get room before its deadline is refused without being sent", async () => {
      fs.script({ rateLimit: { requestsPerMinute: 2, windowMs: 60_000 } });
      const limiter = new RateLimiter();
      const ai = make(limiter);
      await ai();
      await ai();
      const before = fs.server.stats().requests;
      const p = policy({ limiter, budget: false, deadlineMs: 1000 });
      const e = await p.execute(() => "never").catch((x) => x);
      expect(e.reason).toBe("rate-limit-wait");
      expect(e.retryAfterMs).toBeGreaterThan(1000);
      expect(fs.server.stats().requests).toBe(before);
    });
  },
);
