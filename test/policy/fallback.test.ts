import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BreakwaterError,
  CircuitBreaker,
  fallback,
  policy,
  RateLimiter,
  RetryBudget,
  Run,
  reasonOf,
  VirtualClock,
} from "../../src/index.ts";
import type { WaitEvent } from "../../src/policy/options.ts";
import { FakeStream, type FaultServer, startFaultServer } from "../../src/testing/index.ts";
import { drive, driveError, httpError } from "../helpers.ts";

/** An upstream's operation that fails with `errors` in turn, then answers `name`. */
function upstream(name: string, errors: unknown[] = []) {
  let n = 0;
  const calls = () => n;
  const call = async () => {
    const e = errors[n++];
    if (e !== undefined) throw e;
    return name;
  };
  return { call, calls };
}

describe("fallback: the next upstream when this one cannot take the call", () => {
  it("an overload, a rate limit or a timeout moves on at once while the next has room (wait if short, switch if long)", async () => {
    for (const error of [
      httpError(503),
      httpError(429, { headers: { "retry-after": "2" } }),
      httpError(504),
    ]) {
      const clock = new VirtualClock();
      const a = upstream("a", [error, error]);
      const b = upstream("b");
      const chain = fallback([
        { name: "a", policy: policy({ clock }), call: a.call },
        { name: "b", policy: policy({ clock }), call: b.call },
      ]);
      expect(await drive(clock, chain.execute())).toEqual({ ok: true, value: "b" });
      expect([a.calls(), b.calls(), clock.now()]).toEqual([1, 1, 0]);
    }
  });

  it("... but retries it where it is when the next has no room (its breaker open)", async () => {
    const clock = new VirtualClock();
    const a = upstream("a", [httpError(503)]);
    const b = upstream("b");
    const open = new CircuitBreaker({ clock, consecutiveFailures: 1 });
    open.onFailure();
    const chain = fallback([
      { name: "a", policy: policy({ clock }), call: a.call },
      { name: "b", policy: policy({ clock, breaker: open }), call: b.call },
    ]);
    expect(await drive(clock, chain.execute())).toEqual({ ok: true, value: "a" });
    expect([a.calls(), b.calls()]).toEqual([2, 0]);
  });

  it("a call the primary's limiter would hold longer than switching takes goes to the next at once", async () => {
    const clock = new VirtualClock();
    const held = new RateLimiter({ clock });
    held.hold(40_000); // a 429's Retry-After: 40
    const a = upstream("a");
    const b = upstream("b");
    const chain = fallback([
      { name: "a", policy: policy({ clock, limiter: held }), call: a.call },
      { name: "b", policy: policy({ clock }), call: b.call },
    ]);
    for (let i = 0; i < 3; i++)
      expect(await drive(clock, chain.execute())).toEqual({ ok: true, value: "b" });
    expect([a.calls(), b.calls(), clock.now()]).toEqual([0, 3, 0]);
  });

  it("switchAfterMs: how long a call waits at a limiter whose next upstream has room (1 s by default); validated by name", async () => {
    for (const [switchAfterMs, expected] of [
      [undefined, ["b", 0]],
      [120_000, ["a", 60_000]],
    ] as const) {
      const clock = new VirtualClock();
      const paced = new RateLimiter({ clock, limits: { requestsPerMinute: 1 } });
      paced.tryAcquire({})!.settle();
      const chain = fallback(
        [
          { name: "a", policy: policy({ clock, limiter: paced }), call: upstream("a").call },
          { name: "b", policy: policy({ clock }), call: upstream("b").call },
        ],
        switchAfterMs === undefined ? {} : { switchAfterMs },
      );
      const r = await drive(clock, chain.execute());
      expect([r.ok && r.value, clock.now()]).toEqual(expected);
    }
    expect(() =>
      fallback([{ name: "a", policy: policy(), call: () => 1 }], { switchAfterMs: -1 }),
    ).toThrow(/fallback: option "switchAfterMs" must.*got -1/);
  });

  it("primary down: its attempts, then the fallback answers; one ledger names both", async () => {
    const clock = new VirtualClock();
    const a = upstream("a", [httpError(500), httpError(500), httpError(500)]);
    const b = upstream("b");
    const chain = fallback([
      { name: "a", policy: policy({ clock, maxAttempts: 2 }), call: a.call },
      { name: "b", policy: policy({ clock }), call: b.call },
    ]);
    const run = new Run({ clock });
    expect(await drive(clock, chain.execute({ run }))).toEqual({ ok: true, value: "b" });
    expect([a.calls(), b.calls()]).toEqual([2, 1]);
    expect(run.ledgers).toHaveLength(1);
    expect(run.ledgers[0]!.attempts.map((x) => `${x.upstream}:${x.outcome}`)).toEqual([
      "a:failed",
      "a:failed",
      "b:ok",
    ]);
    expect(run.stats).toMatchObject({ calls: 1, attempts: 3, retries: 1 });
  });

  it("a retry the primary's admission refuses is the fallback's first attempt", async () => {
    const clock = new VirtualClock();
    const empty = new RetryBudget({ maxTokens: 1 });
    empty.tryAcquire();
    const a = upstream("a", [httpError(503)]);
    const chain = fallback([
      { name: "a", policy: policy({ clock, budget: empty }), call: a.call },
      { name: "b", policy: policy({ clock }), call: upstream("b").call },
    ]);
    expect(await drive(clock, chain.execute())).toEqual({ ok: true, value: "b" });
    expect(a.calls()).toBe(1);
  });

  it("an open breaker sends the call on without an attempt at the primary", async () => {
    const clock = new VirtualClock();
    const breaker = new CircuitBreaker({ clock, consecutiveFailures: 1 });
    breaker.onFailure();
    const a = upstream("a");
    const chain = fallback([
      { name: "a", policy: policy({ clock, breaker }), call: a.call },
      { name: "b", policy: policy({ clock }), call: upstream("b").call },
    ]);
    expect(await drive(clock, chain.execute())).toEqual({ ok: true, value: "b" });
    expect(a.calls()).toBe(0);
  });

  it("a bad request stays with the caller; a spent quota moves on", async () => {
    const clock = new VirtualClock();
    const bad = httpError(400);
    const b = upstream("b");
    const mk = (e: unknown) =>
      fallback([
        { name: "a", policy: policy({ clock }), call: upstream("a", [e]).call },
        { name: "b", policy: policy({ clock }), call: b.call },
      ]);
    expect(await driveError(clock, mk(bad).execute())).toBe(bad);
    expect(b.calls()).toBe(0);
    const quota = httpError(429, { error: { code: "insufficient_quota" } });
    expect(await drive(clock, mk(quota).execute())).toEqual({ ok: true, value: "b" });
  });

  it("a context-length failure goes to the larger-context model, and only then", async () => {
    const clock = new VirtualClock();
    const long = httpError(400, { error: { code: "context_length_exceeded" } });
    const wide = upstream("wide");
    const chain = fallback([
      { name: "small", policy: policy({ clock }), call: upstream("small", [long]).call },
      { name: "other", policy: policy({ clock }), call: upstream("other").call },
      { name: "wide", policy: policy({ clock }), call: wide.call, forContextExceeded: true },
    ]);
    expect(await drive(clock, chain.execute())).toEqual({ ok: true, value: "wide" });
    const plain = fallback([
      {
        name: "small",
        policy: policy({ clock }),
        call: upstream("small", [httpError(503), httpError(503), httpError(503)]).call,
      },
      {
        name: "wide",
        policy: policy({ clock }),
        call: upstream("wide").call,
        forContextExceeded: true,
      },
    ]);
    expect(reasonOf(await driveError(clock, plain.execute()))).toBe("attempts-exhausted");
  });

  it("one deadline and one attempt cap for the whole chain", async () => {
    const clock = new VirtualClock();
    const slow = (ms: number) => async () => {
      await clock.sleep(ms);
      throw httpError(503);
    };
    const b = upstream("b", [httpError(503), httpError(503), httpError(503)]);
    const chain = fallback(
      [
        { name: "a", policy: policy({ clock, maxAttempts: 1 }), call: slow(4_000) },
        { name: "b", policy: policy({ clock }), call: b.call },
      ],
      { deadlineMs: 5_000, maxAttempts: 3 },
    );
    const started = clock.now();
    const e = await driveError(clock, chain.execute());
    expect(clock.now() - started).toBeLessThanOrEqual(5_000);
    expect(["deadline", "attempts-exhausted"]).toContain(reasonOf(e));
    expect(b.calls()).toBeLessThanOrEqual(2); // 3 in all, one spent at "a"
  });

  it("streams: a silent primary is timed out once (firstTokenTimeoutMs), then the fallback answers", async () => {
    const clock = new VirtualClock();
    let opened = 0;
    const chain = fallback<never, { text: string }>([
      {
        name: "silent",
        policy: policy({ clock, firstTokenTimeoutMs: 10_000 }),
        open: () => {
          opened++;
          return new FakeStream(clock, [{ chunk: { text: "late" }, afterMs: 20_000 }]);
        },
      },
      {
        name: "b",
        policy: policy({ clock }),
        open: () => new FakeStream(clock, [{ chunk: { text: "b" }, afterMs: 10 }]),
      },
    ]);
    const got: string[] = [];
    const r = await drive(
      clock,
      (async () => {
        for await (const c of chain.stream()) got.push(c.text);
      })(),
    );
    expect([r.ok, got, opened, clock.now()]).toEqual([true, ["b"], 1, 10_010]);
  });

  it("streams: a primary that fails before content hands over; after content, nothing moves", async () => {
    const clock = new VirtualClock();
    const text = (t: string) => ({ chunk: { text: t }, afterMs: 10 });
    const chain = (firstFails: "before" | "after") =>
      fallback<never, { text: string }>([
        {
          name: "a",
          policy: policy({ clock, maxAttempts: 1 }),
          open: () =>
            new FakeStream(
              clock,
              firstFails === "before"
                ? [{ error: httpError(503) }]
                : [text("x"), { error: httpError(503) }],
            ),
        },
        {
          name: "b",
          policy: policy({ clock }),
          open: () => new FakeStream(clock, [text("b1"), text("b2")]),
        },
      ]);
    const read = async (s: AsyncIterable<{ text: string }>) => {
      const got: string[] = [];
      const r = await drive(
        clock,
        (async () => {
          for await (const c of s) got.push(c.text);
        })(),
      );
      return { got, error: r.ok ? undefined : r.error };
    };
    const ok = await read(chain("before").stream());
    expect(ok).toEqual({ got: ["b1", "b2"], error: undefined });
    const cut = await read(chain("after").stream());
    expect(cut.got).toEqual(["x"]);
    expect(reasonOf(cut.error)).toBe("stream-interrupted");
  });

  it("validates what it is given, naming it", () => {
    expect(() => fallback([])).toThrow(/"upstreams" must be a non-empty array/);
    expect(() => fallback([{ name: "a", policy: {} as never, call: async () => 1 }])).toThrow(
      /"upstreams\[0\].policy" must be a Policy/,
    );
    const clock = new VirtualClock();
    expect(() =>
      fallback([
        { name: "a", policy: policy({ clock }), call: async () => 1 },
        { name: "b", policy: policy(), call: async () => 1 },
      ]),
    ).toThrow(/one clock/);
    expect(() =>
      fallback([{ name: "a", policy: policy(), call: async () => 1 }], { deadlineMs: -1 }),
    ).toThrow(/"deadlineMs"/);
  });
});

describe("fallback with the real SDK clients on two fault servers", () => {
  let primary: FaultServer;
  let secondary: FaultServer;
  beforeAll(async () => {
    [primary, secondary] = await Promise.all([startFaultServer(), startFaultServer()]);
  });
  afterAll(() => Promise.all([primary.close(), secondary.close()]));

  it("OpenAI answers 500 every time: its attempts, then Anthropic answers", async () => {
    primary.setScript({ rules: [{ route: "openai", status: 500 }] });
    const openai = new OpenAI({ baseURL: `${primary.url}/v1`, apiKey: "test", maxRetries: 0 });
    const anthropic = new Anthropic({ baseURL: secondary.url, apiKey: "test", maxRetries: 0 });
    const fast = { backoff: { baseMs: 5, capMs: 10 } };
    const chain = fallback<string>([
      {
        name: "openai:gpt-4o-mini",
        policy: policy({ ...fast, maxAttempts: 2 }),
        call: async ({ signal }) => {
          const r = await openai.chat.completions.create(
            { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
            { signal },
          );
          return r.choices[0]!.message.content ?? "";
        },
      },
      {
        name: "anthropic:claude",
        policy: policy(fast),
        call: async ({ signal }) => {
          const m = await anthropic.messages.create(
            {
              model: "claude-sonnet-4-6",
              max_tokens: 64,
              messages: [{ role: "user", content: "hi" }],
            },
            { signal },
          );
          return m.content[0]!.type === "text" ? m.content[0]!.text : "";
        },
      },
    ]);
    const run = new Run();
    const answer = await chain.execute({ run });
    expect(answer.length).toBeGreaterThan(0);
    expect(primary.stats().requests).toBe(2);
    expect(secondary.stats().byRoute.anthropic?.requests).toBe(1);
    expect(run.ledgers[0]!.attempts.map((a) => a.upstream)).toEqual([
      "openai:gpt-4o-mini",
      "openai:gpt-4o-mini",
      "anthropic:claude",
    ]);
  });

  /** The guide's chain (docs/fallbacks-and-pools.md): openai, then anthropic, under one 60 s deadline. */
  function readmeChain(viaOpenAI = policy(), viaAnthropic = policy()) {
    const openai = new OpenAI({ baseURL: `${primary.url}/v1`, apiKey: "test", maxRetries: 0 });
    const anthropic = new Anthropic({ baseURL: secondary.url, apiKey: "test", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "hi" }];
    return fallback<string>(
      [
        {
          name: "openai",
          policy: viaOpenAI,
          call: async ({ signal }) =>
            (await openai.chat.completions.create({ model: "gpt-4.1", messages }, { signal }))
              .choices[0]!.message.content ?? "",
        },
        {
          name: "anthropic",
          policy: viaAnthropic,
          call: async ({ signal }) =>
            (
              await anthropic.messages.create(
                { model: "claude-sonnet-4-6", max_tokens: 64, messages },
                { signal },
              )
            ).content[0]!.type,
        },
      ],
      { deadlineMs: 60_000 },
    );
  }

  it("OpenAI answers 429 with Retry-After: 40: every call answers from Anthropic at once, none held in OpenAI's limiter", async () => {
    primary.setScript({ rules: [{ route: "openai", status: 429, retryAfter: 40 }] });
    primary.resetStats();
    secondary.resetStats();
    const chain = readmeChain();
    const started = performance.now();
    for (let i = 0; i < 3; i++) expect(await chain.execute()).toBe("text");
    expect(performance.now() - started).toBeLessThan(2_000);
    expect([primary.stats().requests, secondary.stats().requests]).toEqual([1, 3]);
  });

  it("a single upstream: a 429's hold past the cap ends a later call at once (a local refusal, whole ms); with the cap raised past it, the call waits it out", async () => {
    primary.setScript({
      rules: [{ route: "openai", status: 429, retryAfter: 1, requests: [1, 1] }],
    });
    primary.resetStats();
    const openai = new OpenAI({ baseURL: `${primary.url}/v1`, apiKey: "test", maxRetries: 0 });
    const ask = (p: ReturnType<typeof policy>) =>
      p.execute(({ signal }) =>
        openai.chat.completions.create(
          { model: "gpt-4.1", messages: [{ role: "user", content: "hi" }] },
          { signal },
        ),
      );
    const capped = policy({ retryAfter: { maxMs: 500 } });
    expect(reasonOf(await ask(capped).catch((e: unknown) => e))).toBe("retry-after-too-long");
    const refused = await ask(capped).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BreakwaterError);
    expect([reasonOf(refused), primary.stats().requests]).toEqual(["rate-limit-wait", 1]);
    expect(Number.isInteger((refused as BreakwaterError).retryAfterMs)).toBe(true);
    const waits: WaitEvent[] = [];
    const raised = policy({ retryAfter: { maxMs: 2_000 }, onWait: (e) => void waits.push(e) });
    primary.setScript({
      rules: [{ route: "openai", status: 429, retryAfter: 1, requests: [1, 1] }],
    });
    primary.resetStats();
    const first = ask(raised); // a 429 (retried after its second), which holds the limiter
    while (waits.length === 0) await new Promise((r) => setTimeout(r, 5)); // its 429 is booked
    await Promise.all([first, ask(raised)]); // the second waits the hold out
    const held = waits.find((w) => w.why === "rate-limit");
    expect(waits.map((w) => w.why).sort()).toEqual(["rate-limit", "retry-after"]);
    expect(held!.ms).toBeGreaterThan(500);
    expect(primary.stats().requests).toBe(3);
  });
});
