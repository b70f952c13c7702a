import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/core/clock.ts";
import { BreakwaterError, reasonOf } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import type { StreamOptions } from "../../src/policy/stream.ts";
import { CUTS_READS, PULL, type Pullable } from "../../src/policy/stream-head.ts";
import { Run } from "../../src/run/run.ts";
import { FakeStream, type StreamStep } from "../../src/testing/fake-stream.ts";
import { drive, driveError, httpError } from "../helpers.ts";

type Chunk = {
  text?: string;
  usage?: { in?: number; out?: number };
  error?: unknown;
  meta?: boolean;
};
const usage = (c: Chunk) =>
  c.usage ? { inputTokens: c.usage.in, outputTokens: c.usage.out } : undefined;
const t = (text: string, afterMs = 10): StreamStep<Chunk> => ({ chunk: { text }, afterMs });

/** Opens one scripted stream per attempt (the last script repeats). */
function provider(clock: VirtualClock, scripts: StreamStep<Chunk>[][]) {
  const opened: FakeStream<Chunk>[] = [];
  const open = () => {
    const s = new FakeStream(clock, scripts[Math.min(opened.length, scripts.length - 1)]!);
    opened.push(s);
    return s;
  };
  return { opened, open };
}

async function collect<C>(clock: VirtualClock, it: AsyncIterable<C>) {
  const got: C[] = [];
  const r = await drive(
    clock,
    (async () => {
      for await (const c of it) got.push(c);
    })(),
  );
  return { got, error: r.ok ? undefined : r.error };
}

describe("policy.stream", () => {
  it("over a call that is not a stream: a TypeError that says so, sent once (a bug, not retried)", async () => {
    const clock = new VirtualClock();
    let opened = 0;
    const notAStream = async () => {
      opened++;
      return { choices: [] } as never;
    };
    for (const hedge of [false, true]) {
      const { error } = await collect(clock, policy({ clock, hedge }).stream(notAStream));
      expect(error).toBeInstanceOf(TypeError);
      expect((error as Error).message).toBe(
        "policy.stream: the attempt must return an async iterable (a stream), got object; for a call that is not a stream, use policy.execute",
      );
    }
    expect(opened).toBe(2);
  });

  it("a failure before the first chunk is retried; the consumer sees one clean answer", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, usage: undefined });
    const { opened, open } = provider(clock, [
      [{ error: httpError(503), afterMs: 5 }],
      [t("Hel"), t("lo"), { chunk: { usage: { in: 10, out: 2 } } }],
    ]);
    const s = p.stream(open, { usage });
    const { got, error } = await collect(clock, s);
    expect(error).toBeUndefined();
    expect(got.map((c) => c.text ?? "").join("")).toBe("Hello");
    expect(opened).toHaveLength(2);
    expect(s.ledger.attempts.map((a) => a.outcome)).toEqual(["failed", "ok"]);
    const outcome = await s.done;
    expect(outcome.usage).toEqual({ inputTokens: 10, outputTokens: 2 });
    expect(outcome.stopped).toBe(false);
  });

  it("a failure after the first chunk is not retried: partial chunks and usage on the error", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const cause = httpError(500);
    const { opened, open } = provider(clock, [
      [
        { chunk: { usage: { in: 40 } } },
        t("Once upon"),
        { chunk: { usage: { out: 3 } } },
        { error: cause },
      ],
    ]);
    const s = p.stream(open, { usage });
    const { got, error } = await collect(clock, s);
    expect(opened).toHaveLength(1);
    expect(got.some((c) => c.text === "Once upon")).toBe(true);
    expect(error).toBeInstanceOf(BreakwaterError);
    const e = error as BreakwaterError;
    expect(e.reason).toBe("stream-interrupted");
    expect(e.cause).toBe(cause);
    expect(e.partial?.chunks).toEqual(got);
    expect(e.partial?.usage).toEqual({ inputTokens: 40, outputTokens: 3 });
    expect(e.ledger?.wasted).toEqual({ inputTokens: 40, outputTokens: 3 });
    await expect(s.done).rejects.toBe(error);
  });

  it("a stall before the first chunk is a first-token timeout and is retried", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, firstTokenTimeoutMs: 2_000 });
    const { opened, open } = provider(clock, [[{ stall: true }], [t("ok")]]);
    const s = p.stream(open);
    const { got, error } = await collect(clock, s);
    expect(error).toBeUndefined();
    expect(got).toEqual([{ text: "ok" }]);
    expect(opened[0]!.closed).toBe(true);
    expect(s.ledger.attempts[0]).toMatchObject({
      outcome: "failed",
      durationMs: 2_000,
      failure: { kind: "timeout", code: "first-token_timeout" },
    });
  });

  it("a stall mid-stream is an idle timeout: interrupted, not retried", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, idleTimeoutMs: 1_000 });
    const { opened, open } = provider(clock, [[t("a"), t("b"), { stall: true }]]);
    const { got, error } = await collect(clock, p.stream(open));
    expect(got.map((c) => c.text)).toEqual(["a", "b"]);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect((error as BreakwaterError).failure).toMatchObject({
      kind: "timeout",
      code: "idle_timeout",
    });
    expect(opened).toHaveLength(1);
    expect(opened[0]!.closed).toBe(true);
    expect(clock.now()).toBeGreaterThanOrEqual(1_020);
    expect(clock.now()).toBeLessThanOrEqual(1_020 + 1);
  });

  it("a slow but steady stream is not cut by the idle timeout", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, idleTimeoutMs: 1_000, firstTokenTimeoutMs: 1_000 });
    const steps = Array.from({ length: 30 }, (_, i) => t(String(i), 900));
    const { got, error } = await collect(clock, p.stream(provider(clock, [steps]).open));
    expect(error).toBeUndefined();
    expect(got).toHaveLength(30);
    expect(clock.now()).toBe(27_000);
  });

  it("a total cap ends a long stream", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, totalTimeoutMs: 500 });
    const steps = Array.from({ length: 10 }, (_, i) => t(String(i), 100));
    const { got, error } = await collect(clock, p.stream(provider(clock, [steps]).open));
    expect(got).toHaveLength(4);
    expect((error as BreakwaterError).failure?.code).toBe("total_timeout");
  });

  it("an in-band error chunk first is retried; after content it interrupts", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const overloaded = { error: { type: "error", error: { type: "overloaded_error" } } };
    const inspect = (c: Chunk) => c.error;
    const first = provider(clock, [
      [{ chunk: { meta: true } }, { chunk: { error: overloaded } }],
      [t("fine")],
    ]);
    const a = await collect(clock, p.stream(first.open, { inspect, isContent: (c) => !c.meta }));
    expect(a.error).toBeUndefined();
    expect(a.got).toEqual([{ text: "fine" }]); // the held meta chunk of the failed attempt is dropped
    expect(first.opened).toHaveLength(2);

    const later = provider(clock, [[t("half"), { chunk: { error: overloaded } }]]);
    const b = await collect(clock, p.stream(later.open, { inspect }));
    expect(b.got).toEqual([{ text: "half" }]);
    expect(reasonOf(b.error)).toBe("stream-interrupted");
    expect((b.error as BreakwaterError).failure?.kind).toBe("overloaded");
    expect(later.opened).toHaveLength(1);
  });

  it("holds non-content chunks until content, then delivers them in order", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const { open } = provider(clock, [[{ chunk: { meta: true } }, t("x"), t("y")]]);
    const { got } = await collect(clock, p.stream(open, { isContent: (c) => !c.meta }));
    expect(got).toEqual([{ meta: true }, { text: "x" }, { text: "y" }]);
  });

  it("a non-retryable error before content throws the provider's own error", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const e401 = httpError(401);
    const { opened, open } = provider(clock, [[{ error: e401 }]]);
    const { error } = await collect(clock, p.stream(open));
    expect(error).toBe(e401);
    expect(reasonOf(error)).toBe("not-retryable");
    expect(opened).toHaveLength(1);
  });

  it("a failure in open() itself is retried", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    let n = 0;
    const s = p.stream(async () => {
      if (n++ === 0) throw httpError(529);
      return new FakeStream(clock, [t("hi")]);
    });
    const { got } = await collect(clock, s);
    expect(got).toEqual([{ text: "hi" }]);
    expect(n).toBe(2);
  });

  it("buffer mode retries a mid-stream failure and emits only the good answer", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const { opened, open } = provider(clock, [
      [t("bad "), t("start"), { error: httpError(502) }],
      [t("good "), t("answer")],
    ]);
    const s = p.stream(open, { mode: "buffer" });
    const { got, error } = await collect(clock, s);
    expect(error).toBeUndefined();
    expect(got.map((c) => c.text).join("")).toBe("good answer");
    expect(opened).toHaveLength(2);
  });

  it("restart mode calls onDiscard before retrying, then streams the new answer", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const events: string[] = [];
    const { opened, open } = provider(clock, [
      [t("first"), { error: httpError(503) }],
      [t("second")],
    ]);
    const s = p.stream(
      (ctx) => {
        events.push(`open ${ctx.attempt}`);
        return open();
      },
      {
        mode: "restart",
        onDiscard: (d) => void events.push(`discard ${d.attempt} ${d.chunks.length}`),
      },
    );
    const got: string[] = [];
    await drive(
      clock,
      (async () => {
        for await (const c of s) got.push(`${c.text}`);
      })(),
    );
    expect(got).toEqual(["first", "second"]);
    expect(events).toEqual(["open 1", "discard 1 1", "open 2"]);
    expect(opened).toHaveLength(2);
  });

  it("restart mode without onDiscard is a configuration error", () => {
    const p = policy();
    expect(() =>
      p.stream(() => new FakeStream(new VirtualClock(), []), { mode: "restart" }),
    ).toThrow(/"onDiscard" must be a function when mode is "restart"/);
    expect(() =>
      p.stream(() => new FakeStream(new VirtualClock(), []), { mode: "replay" as never }),
    ).toThrow(/"mode" must be one of/);
    expect(() =>
      p.stream(() => new FakeStream(new VirtualClock(), []), { idleTimeoutMs: 0 }),
    ).toThrow(/"idleTimeoutMs"/);
    expect(() =>
      p.stream(() => new FakeStream(new VirtualClock(), []), { idle: 5 } as never),
    ).toThrow(/"idle" must be a known option/);
  });

  it("breaking out of for-await closes the source and leaves no timer", async () => {
    const clock = new VirtualClock();
    const p = policy({
      clock,
      idleTimeoutMs: 5_000,
      firstTokenTimeoutMs: 5_000,
      deadlineMs: 60_000,
    });
    const { opened, open } = provider(clock, [[t("a"), t("b"), t("c")]]);
    const s = p.stream(open);
    await drive(
      clock,
      (async () => {
        for await (const c of s) if (c.text === "a") break;
      })(),
    );
    await new Promise((r) => setImmediate(r));
    expect(opened[0]!.closed).toBe(true);
    expect(clock.pending).toBe(0);
    const outcome = await s.done;
    expect(outcome).toMatchObject({ stopped: true, chunks: 1 });
  });

  it("aborting closes the source at once and leaves no timer or listener", async () => {
    const clock = new VirtualClock();
    const ac = new AbortController();
    const p = policy({ clock, idleTimeoutMs: 5_000 });
    const { opened, open } = provider(clock, [[t("a"), { stall: true }]]);
    const s = p.stream(open, { signal: ac.signal });
    const reading = (async () => {
      const got = [];
      for await (const c of s) got.push(c);
      return got;
    })();
    const settled = reading.catch((e) => e);
    await clock.advance(10);
    ac.abort(new DOMException("user left", "AbortError"));
    const err = await settled;
    expect((err as Error).name).toBe("AbortError");
    expect(reasonOf(err)).toBe("cancelled");
    await new Promise((r) => setImmediate(r));
    expect(opened[0]!.closed).toBe(true);
    expect(clock.pending).toBe(0);
    const { EventEmitter } = await import("node:events");
    expect(EventEmitter.getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  it("respects the call deadline mid-stream", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, deadlineMs: 250 });
    const steps = Array.from({ length: 10 }, (_, i) => t(String(i), 100));
    const { got, error } = await collect(clock, p.stream(provider(clock, [steps]).open));
    expect(got).toHaveLength(2);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(clock.now()).toBe(250);
  });
});

describe("the ledger", () => {
  const opts: StreamOptions<Chunk> = { usage };

  it("success after a failed partial attempt: usage, wasted and billed add up", async () => {
    const clock = new VirtualClock();
    const p = policy({
      clock,
      model: "m",
      prices: { m: { inputPerMillion: 3, outputPerMillion: 15 } },
    });
    const { open } = provider(clock, [
      [{ chunk: { usage: { in: 1_000, out: 1 } }, afterMs: 1 }, { error: httpError(529) }],
      [
        { chunk: { usage: { in: 1_000, out: 1 } } },
        t("answer"),
        { chunk: { usage: { out: 200 } } },
      ],
    ]);
    const s = p.stream(open, { ...opts, isContent: (c) => c.text !== undefined });
    await collect(clock, s);
    const l = s.ledger;
    expect(l.usage).toEqual({ inputTokens: 1_000, outputTokens: 200 });
    expect(l.wasted).toEqual({ inputTokens: 1_000, outputTokens: 1 });
    expect(l.billed).toEqual({ inputTokens: 2_000, outputTokens: 201 });
    expect(l.cost?.billed).toBeCloseTo((2_000 * 3 + 201 * 15) / 1e6, 12);
    expect(l.attempts[1]!.waitMs).toBeGreaterThanOrEqual(0);
  });

  it("total failure still reports everything it spent", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 3 });
    const { open } = provider(clock, [
      [{ chunk: { usage: { in: 500 } } }, { error: httpError(503) }],
    ]);
    const s = p.stream(open, { ...opts, isContent: (c) => c.text !== undefined });
    const { error } = await collect(clock, s);
    expect(reasonOf(error)).toBe("attempts-exhausted");
    expect(s.ledger.usage).toEqual({ inputTokens: 0, outputTokens: 0 });
    expect(s.ledger.wasted).toEqual({ inputTokens: 1_500, outputTokens: 0 });
    expect(s.ledger.billed).toEqual({ inputTokens: 1_500, outputTokens: 0 });
  });

  it("execute accepts a usage reader too", async () => {
    const clock = new VirtualClock();
    const seen: unknown[] = [];
    const p = policy({ clock, onSuccess: (e) => void seen.push(e.ledger.billed) });
    let n = 0;
    await drive(
      clock,
      p.execute(
        async () => {
          if (n++ === 0) throw httpError(503);
          return { tokens: { i: 7, o: 3 } };
        },
        {
          usage: (r) => ({
            inputTokens: (r as { tokens: { i: number } }).tokens.i,
            outputTokens: 3,
          }),
        },
      ),
    );
    expect(seen).toEqual([{ inputTokens: 7, outputTokens: 3 }]);
  });

  it("a run enforces its token allowance across calls", async () => {
    const clock = new VirtualClock();
    const run = new Run({ clock, maxTokens: 1_000 });
    const p = policy({ clock });
    const big = () =>
      new FakeStream<Chunk>(clock, [t("x"), { chunk: { usage: { in: 900, out: 150 } } }]);
    await collect(clock, p.stream(big, { ...opts, run }));
    expect(run.billed).toEqual({ inputTokens: 900, outputTokens: 150 });
    const { error } = await collect(clock, p.stream(big, { ...opts, run }));
    expect(reasonOf(error)).toBe("run-tokens");
  });

  it("a run stops retrying once retries burned their share of the allowance", async () => {
    const clock = new VirtualClock();
    const run = new Run({ clock, maxTokens: 10_000, maxRetryShare: 0.5 });
    const p = policy({ clock, maxAttempts: 10 });
    const failing = () =>
      new FakeStream<Chunk>(clock, [
        { chunk: { usage: { in: 2_000 } } },
        { error: httpError(503) },
      ]);
    const s = p.stream(failing, { ...opts, run, isContent: (c) => c.text !== undefined });
    const { error } = await collect(clock, s);
    expect(reasonOf(error)).toBe("run-retry-share");
    expect(s.ledger.attempts).toHaveLength(3); // 6 000 wasted > 50% of 10 000
    expect(run.wasted.inputTokens).toBe(6_000);
  });

  it("an unread failing stream raises no unhandled rejection", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 1 });
    const s = p.stream(() => new FakeStream<Chunk>(clock, [{ error: httpError(400) }]));
    const err = await driveError(clock, s.next());
    expect(reasonOf(err)).toBe("not-retryable");
  });
});

describe("a stream that succeeds on its first attempt reports what it used", () => {
  it("the outcome's usage and the ledger's, with nobody watching (no run, no hooks)", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, usage: undefined });
    const { open } = provider(clock, [
      [t("Hel"), t("lo"), { chunk: { text: "", usage: { in: 1200, out: 40 } }, afterMs: 5 }],
    ]);
    const s = p.stream(open, { usage });
    const { error } = await collect(clock, s);
    expect(error).toBeUndefined();
    const outcome = await s.done;
    expect(outcome.usage).toEqual({ inputTokens: 1200, outputTokens: 40 });
    expect(s.ledger.usage).toEqual({ inputTokens: 1200, outputTokens: 40 });
    expect(s.ledger.attempts.map((a) => a.outcome)).toEqual(["ok"]);
  });

  it("and counts it on its run", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const run = new Run({ clock });
    const { open } = provider(clock, [
      [t("Hi"), { chunk: { text: "", usage: { in: 10, out: 2 } } }],
    ]);
    await collect(clock, p.stream(open, { usage, run }));
    expect(run.usage).toEqual({ inputTokens: 10, outputTokens: 2 });
  });
});

/** A source that says CUTS_READS: `return()` ends a read still pending (as a stream
 * reader's cancel does). It gives `chunks`, then ends (`ends`) or stalls until it is
 * closed; a `late` chunk arrives after the close, which the stream must not take. */
function cuttingSource(chunks: Chunk[], late?: Chunk, ends = false) {
  const state = { returnedWhilePending: 0, reads: 0, closed: false };
  let pending: ((r: IteratorResult<Chunk>) => void) | undefined;
  const source: AsyncIterator<Chunk> & { [CUTS_READS]: true } = {
    [CUTS_READS]: true,
    next() {
      state.reads++;
      const chunk = chunks.shift();
      if (chunk !== undefined) return Promise.resolve({ done: false, value: chunk });
      if (state.closed || ends) return Promise.resolve({ done: true, value: undefined });
      return new Promise((resolve) => {
        pending = resolve;
      });
    },
    async return() {
      state.closed = true;
      if (pending !== undefined) {
        state.returnedWhilePending++;
        pending(
          late === undefined ? { done: true, value: undefined } : { done: false, value: late },
        );
        pending = undefined;
      }
      return { done: true, value: undefined };
    },
  };
  return { state, open: () => ({ [Symbol.asyncIterator]: () => source }) };
}

describe("a source whose close ends a pending read (CUTS_READS)", () => {
  it("a stall is cut by closing the source: idle timeout at its time, the late chunk not taken", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, idleTimeoutMs: 1_000 });
    const { state, open } = cuttingSource([{ text: "a" }, { text: "b" }], { text: "late" });
    const { got, error } = await collect(clock, p.stream(open));
    expect(got.map((c) => c.text)).toEqual(["a", "b"]);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect((error as BreakwaterError).failure?.code).toBe("idle_timeout");
    expect(state.returnedWhilePending).toBe(1); // cut by closing it, not left pending
    expect(clock.now()).toBe(1_000);
    expect(clock.pending).toBe(0);
  });

  it("the caller's abort cuts a pending read the same way, with the caller's reason", async () => {
    const clock = new VirtualClock();
    const ac = new AbortController();
    const p = policy({ clock });
    const { state, open } = cuttingSource([{ text: "a" }]);
    const s = p.stream(open, { signal: ac.signal });
    const reading = (async () => {
      for await (const _ of s);
    })().catch((e) => e);
    await clock.advance(10);
    ac.abort(new DOMException("user left", "AbortError"));
    const err = await reading;
    expect((err as Error).name).toBe("AbortError");
    expect(reasonOf(err)).toBe("cancelled");
    expect(state.returnedWhilePending).toBe(1);
    const { EventEmitter } = await import("node:events");
    expect(EventEmitter.getEventListeners(ac.signal, "abort")).toHaveLength(0);
  });

  it("a source's own failure is its own, not a cut: a 503 before content is retried", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, deadlineMs: 60_000 });
    let opens = 0;
    const open = () => {
      opens++;
      if (opens === 2) return cuttingSource([{ text: "ok" }]).open();
      const failing: AsyncIterator<Chunk> & { [CUTS_READS]: true } = {
        [CUTS_READS]: true,
        next: () => Promise.reject(httpError(503)),
        return: async () => ({ done: true, value: undefined }),
      };
      return { [Symbol.asyncIterator]: () => failing };
    };
    const s = p.stream(open);
    const chunks: Chunk[] = [];
    const reading = (async () => {
      for await (const c of s) {
        chunks.push(c);
        if (c.text === "ok") break;
      }
    })();
    const r = await drive(clock, reading);
    expect(r.ok).toBe(true);
    expect(chunks.map((c) => c.text)).toEqual(["ok"]);
    expect(s.ledger.attempts.map((a) => a.outcome)).toEqual(["failed", "ok"]);
  });
});

/** What `reading` resolves with, the clock driven until it does. */
async function driven<T>(clock: VirtualClock, reading: Promise<T>): Promise<T> {
  const r = await drive(clock, reading);
  if (!r.ok) throw r.error;
  return r.value;
}

/** Reads a stream by PULL to its end: the chunks, and the error it ended with. */
function pullAll<C>(it: AsyncIterator<C>): Promise<{ got: C[]; error: unknown }> {
  const got: C[] = [];
  return new Promise((resolve) => {
    const ok = (r: IteratorResult<C>) => {
      if (r.done) return resolve({ got, error: undefined });
      got.push(r.value);
      (it as Pullable<C>)[PULL](ok, fail);
    };
    const fail = (error: unknown) => resolve({ got, error });
    (it as Pullable<C>)[PULL](ok, fail);
  });
}

/** `cuttingSource`, readable by PULL too; `pulls` counts the reads that came that way. */
function pullingSource(chunks: Chunk[], late?: Chunk, ends = false) {
  const inner = cuttingSource(chunks, late, ends);
  const it = inner.open()[Symbol.asyncIterator]();
  const counts = { pulls: 0 };
  const source = Object.assign(it, {
    [PULL](ok: (r: IteratorResult<Chunk>) => void, fail: (e: unknown) => void) {
      counts.pulls++;
      it.next().then(ok, fail);
    },
  });
  return { ...inner, counts, open: () => ({ [Symbol.asyncIterator]: () => source }) };
}

describe("PULL: a stream read by callback, with no promise a read", () => {
  it("reads every chunk and ends as next() would, through a source read by PULL too", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const chunks = [{ text: "a" }, { text: "b", usage: { in: 3, out: 2 } }];
    const { counts, open } = pullingSource(chunks, undefined, true);
    const s = p.stream(open, { usage });
    const { got, error } = await pullAll(s);
    expect(error).toBeUndefined();
    expect(got.map((c) => c.text)).toEqual(["a", "b"]);
    expect(counts.pulls).toBe(2); // after the first (opening) read, by PULL, not next()
    expect((await s.done).usage).toEqual({ inputTokens: 3, outputTokens: 2 });
  });

  it("an idle stall is cut by closing the source: the timeout's failure, the late chunk not taken", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, idleTimeoutMs: 1_000 });
    const { state, counts, open } = pullingSource([{ text: "a" }], { text: "late" });
    const reading = pullAll(p.stream(open));
    const { got, error } = await driven(clock, reading);
    expect(got.map((c) => c.text)).toEqual(["a"]);
    expect((error as BreakwaterError).failure?.code).toBe("idle_timeout");
    expect(state.returnedWhilePending).toBe(1);
    expect(counts.pulls).toBe(1); // the read the stall held
    expect(clock.pending).toBe(0);
  });

  it("a source that cannot end a pending read is raced, read by PULL or not: a stall meets the deadline", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, deadlineMs: 500 });
    const { open } = provider(clock, [[t("a"), { stall: true }]]);
    const reading = pullAll(p.stream(open));
    const { got, error } = await driven(clock, reading);
    expect(got.map((c) => c.text)).toEqual(["a"]);
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(clock.now()).toBe(500);
  });
});

describe("an attempt picks its read path when its source opens and when its timer changes", () => {
  /** A source readable by PULL and by next() (not CUTS_READS), counting each way. */
  function countingSource(chunks: Chunk[]) {
    const counts = { pulls: 0, nexts: 0 };
    let i = 0;
    const read = () =>
      Promise.resolve<IteratorResult<Chunk>>(
        i < chunks.length ? { done: false, value: chunks[i++]! } : { done: true, value: undefined },
      );
    const source = {
      next: () => {
        counts.nexts++;
        return read();
      },
      [PULL](ok: (r: IteratorResult<Chunk>) => void, fail: (e: unknown) => void) {
        counts.pulls++;
        read().then(ok, fail);
      },
    };
    return { counts, open: () => ({ [Symbol.asyncIterator]: () => source }) };
  }

  it("raced while a first-token timer can cut it; by PULL once content came and no timer is left", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, firstTokenTimeoutMs: 1_000 });
    const { counts, open } = countingSource([{ text: "a" }, { text: "b" }, { text: "c" }]);
    const { got, error } = await pullAll(p.stream(open));
    expect(error).toBeUndefined();
    expect(got.map((c) => c.text)).toEqual(["a", "b", "c"]);
    // The opening read and the first (timed) read went by next(); "b", "c" and the end by PULL.
    expect(counts).toEqual({ nexts: 1, pulls: 3 });
    expect(clock.pending).toBe(0);
  });

  it("raced to the end while an idle timer can cut it (the source cannot end a pending read)", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, idleTimeoutMs: 1_000 });
    const { counts, open } = countingSource([{ text: "a" }, { text: "b" }]);
    const { got } = await pullAll(p.stream(open));
    expect(got.map((c) => c.text)).toEqual(["a", "b"]);
    expect(counts).toEqual({ nexts: 3, pulls: 0 });
  });
});

describe("a consumer that leaves while a read of a source that cuts reads is pending", () => {
  it("ends the stream once: one attempt booked ok, one success heard", async () => {
    const clock = new VirtualClock();
    let successes = 0;
    const p = policy({ clock, onSuccess: () => void successes++ });
    const { state, open } = cuttingSource([{ text: "a" }]);
    const ac = new AbortController(); // abortable: the read is cut by closing, not raced
    const s = p.stream(open, { signal: ac.signal });
    expect((await s.next()).value?.text).toBe("a");
    const pending = s.next(); // stalls: nothing more comes
    await s.return();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(state.closed).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(s.ledger.attempts.map((a) => a.outcome)).toEqual(["ok"]);
    expect(successes).toBe(1);
    expect(await s.done).toMatchObject({ stopped: true });
  });
});

describe("a consumer that leaves while the slow path reads or opens", () => {
  it("a pending read in buffer mode, or before content, books nothing after the leave", async () => {
    for (const options of [{ mode: "buffer" as const }, { isContent: (c: Chunk) => !c.meta }]) {
      const clock = new VirtualClock();
      let successes = 0;
      const p = policy({ clock, onSuccess: () => void successes++ });
      const { state, open } = cuttingSource([{ text: "a", meta: true }]);
      const s = p.stream(open, { ...options, validate: () => false });
      const pending = s.next(); // held back (buffer / not content): the read stalls
      await new Promise((r) => setImmediate(r));
      await s.return();
      expect(await pending).toEqual({ done: true, value: undefined });
      expect(state.closed).toBe(true);
      await new Promise((r) => setImmediate(r));
      expect(s.ledger.attempts.map((a) => a.outcome)).not.toContain("failed");
      expect(successes).toBeLessThanOrEqual(1);
    }
  });

  it("a stream that opens after its consumer left is closed", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock });
    const { state, open } = cuttingSource([{ text: "a" }]);
    let opened!: () => void;
    const late = new Promise<void>((r) => {
      opened = r;
    });
    const s = p.stream(async () => {
      await late;
      return open();
    });
    const pending = s.next();
    await new Promise((r) => setImmediate(r));
    await s.return();
    opened();
    expect(await pending).toEqual({ done: true, value: undefined });
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(state.closed).toBe(true);
  });
});
