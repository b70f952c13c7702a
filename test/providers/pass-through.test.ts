import { describe, expect, it } from "vitest";
import { PULL } from "../../src/policy/stream-head.ts";
import { type Ends, passThrough } from "../../src/providers/pass-through.ts";
import { SseEvent } from "../../src/providers/sse.ts";

const enc = new TextEncoder();

/** Events as a policy stream hands them on, then `fail` (if given) instead of the end. */
function events(raws: string[], fail?: unknown) {
  const seen = { returned: 0 };
  const list = raws.map((r, i) => new SseEvent(r, i % 2 === 0 ? enc.encode(r) : undefined));
  let at = 0;
  const it = {
    next: async (): Promise<IteratorResult<SseEvent>> => {
      if (at < list.length) return { done: false, value: list[at++]! };
      if (fail !== undefined) throw fail;
      return { done: true, value: undefined };
    },
    return: async (): Promise<IteratorResult<SseEvent>> => {
      seen.returned++;
      return { done: true, value: undefined };
    },
  };
  return { it, seen };
}

const RAWS = ["data: a\n\n", "data: é\n\n", "data: 🙂\n\n", "data: [DONE]\n\n"];
const noFailure: Ends = { failed: async () => undefined };

async function iterate(body: ReadableStream<Uint8Array>): Promise<string> {
  const dec = new TextDecoder();
  let text = "";
  for await (const b of body as unknown as AsyncIterable<Uint8Array>)
    text += dec.decode(b, { stream: true });
  return text + dec.decode();
}

describe("passThrough: the body an SDK reads from the first content on", () => {
  it("iterated (as the openai and anthropic SDKs read it): every event's bytes, in order, then the end; the body reads as used", async () => {
    const { it: ev } = events(RAWS.slice(1));
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const res = new Response(passThrough(ev, first, noFailure));
    const body = res.body!;
    const iterator = (body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    expect(body.locked).toBe(true); // as iterating any stream locks it
    expect(() => body.getReader()).toThrow(TypeError);
    const dec = new TextDecoder();
    let text = "";
    for (let r = await iterator.next(); !r.done; r = await iterator.next())
      text += dec.decode(r.value, { stream: true });
    expect(text).toBe(RAWS.join(""));
    await new Promise((r) => setImmediate(r));
    expect(res.bodyUsed).toBe(true);
    await expect(res.text()).rejects.toThrow(TypeError);
  });

  it("read as a ReadableStream (getReader, a Response made of it): the same bytes", async () => {
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const a = passThrough(events(RAWS.slice(1)).it, first, noFailure);
    expect(await new Response(a).text()).toBe(RAWS.join(""));
    const b = passThrough(events(RAWS.slice(1)).it, first, noFailure);
    const reader = b.getReader();
    const parts: number[] = [];
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value.length);
    expect(parts).toEqual(RAWS.map((r) => enc.encode(r).length));
    // Locked by its reader: iterating it now fails as iterating a locked stream does.
    expect(() => (b as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]()).toThrow(
      TypeError,
    );
  });

  it("a consumer that stops (break, cancel) closes the events", async () => {
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const one = events(RAWS.slice(1));
    for await (const _ of passThrough(
      one.it,
      first,
      noFailure,
    ) as unknown as AsyncIterable<unknown>)
      break;
    expect(one.seen.returned).toBe(1);
    const two = events(RAWS.slice(1));
    await passThrough(two.it, first, noFailure).cancel();
    expect(two.seen.returned).toBe(1);
  });

  it("a failure with last bytes (an error event) hands them on, then ends; without, the read rejects with it", async () => {
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const boom = new Error("cut");
    const errorEvent = 'data: {"error":{"message":"overloaded"}}\n\n';
    const told: unknown[] = [];
    const ends: Ends = {
      failed: async (e) => {
        told.push(e);
        return errorEvent;
      },
    };
    expect(await iterate(passThrough(events(["data: b\n\n"], boom).it, first, ends))).toBe(
      `${RAWS[0]}data: b\n\n${errorEvent}`,
    );
    expect(await new Response(passThrough(events([], boom).it, first, ends)).text()).toBe(
      RAWS[0]! + errorEvent,
    );
    expect(told).toEqual([boom, boom]);
    await expect(iterate(passThrough(events([], boom).it, first, noFailure))).rejects.toBe(boom);
    await expect(
      new Response(passThrough(events([], boom).it, first, noFailure)).text(),
    ).rejects.toBe(boom);
  });

  it("a stream read to its end is told whole, characters split between events included", async () => {
    const texts: string[] = [];
    const ends: Ends = { failed: async () => undefined, done: async (t) => void texts.push(t) };
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    await iterate(passThrough(events(RAWS.slice(1)).it, first, ends));
    const bytes = enc.encode("data: 日本\n\n");
    const halves = [
      new SseEvent("", bytes.subarray(0, 7)), // ends inside 日
      new SseEvent("", bytes.subarray(7)),
    ];
    let i = 0;
    const split = {
      next: async (): Promise<IteratorResult<SseEvent>> =>
        i < halves.length ? { done: false, value: halves[i++]! } : { done: true, value: undefined },
      return: async (): Promise<IteratorResult<SseEvent>> => ({ done: true, value: undefined }),
    };
    await iterate(passThrough(split, first, ends));
    expect(texts).toEqual([RAWS.join(""), `${RAWS[0]}data: 日本\n\n`]);
  });

  it("events readable by PULL are read that way: the same bytes, a failure's last bytes after them", async () => {
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const make = (fail?: unknown) => {
      const { it } = events(RAWS.slice(1), fail);
      return Object.assign(
        {
          next: () => Promise.reject(new Error("read by next()")),
          return: it.return,
        },
        {
          [PULL](ok: (r: IteratorResult<SseEvent>) => void, no: (e: unknown) => void) {
            it.next().then(ok, no);
          },
        },
      );
    };
    expect(await iterate(passThrough(make(), first, noFailure))).toBe(RAWS.join(""));
    const last = "data: last\n\n";
    const ends: Ends = { failed: async () => last };
    expect(await iterate(passThrough(make(new Error("cut")), first, ends))).toBe(
      `${RAWS.join("")}data: last\n\n`,
    );
    const boom = new Error("boom");
    await expect(iterate(passThrough(make(boom), first, noFailure))).rejects.toBe(boom);
  });

  it("a consumer that leaves mid-read: the read ends, nothing is recorded as a whole answer", async () => {
    const texts: string[] = [];
    const ends: Ends = { failed: async () => undefined, done: async (t) => void texts.push(t) };
    let release: (() => void) | undefined;
    const stalled = {
      // Stalls until closed, then ends (as a reader's cancel ends its pending read).
      next: () =>
        new Promise<IteratorResult<SseEvent>>((resolve) => {
          release = () => resolve({ done: true, value: undefined });
        }),
      return: async (): Promise<IteratorResult<SseEvent>> => {
        release?.();
        return { done: true, value: undefined };
      },
    };
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const it = (passThrough(stalled, first, ends) as unknown as AsyncIterable<Uint8Array>)[
      Symbol.asyncIterator
    ]();
    await it.next();
    const pending = it.next();
    await it.return?.();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(texts).toEqual([]);
  });

  it("reads asked for before the last one settled come in order; a failure with nothing to hand on fails every read after it", async () => {
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const pull = Object.assign(events(RAWS.slice(1)).it, {
      [PULL](ok: (r: IteratorResult<SseEvent>) => void, no: (e: unknown) => void) {
        setImmediate(() => pull.next().then(ok, no)); // each read answers later
      },
    });
    const it = (passThrough(pull, first, noFailure) as unknown as AsyncIterable<Uint8Array>)[
      Symbol.asyncIterator
    ]();
    const reads = await Promise.all([it.next(), it.next(), it.next(), it.next(), it.next()]);
    const dec = new TextDecoder();
    expect(reads.map((r) => (r.done ? "end" : dec.decode(r.value)))).toEqual([...RAWS, "end"]);
    const boom = new Error("boom");
    const texts: string[] = [];
    const ends: Ends = { failed: async () => undefined, done: async (t) => void texts.push(t) };
    const failing = (
      passThrough(events([], boom).it, first, ends) as unknown as AsyncIterable<Uint8Array>
    )[Symbol.asyncIterator]();
    await failing.next();
    await expect(failing.next()).rejects.toBe(boom);
    await expect(failing.next()).rejects.toBe(boom);
    expect(texts).toEqual([]);
  });

  it("a read asked for while a failure is being handled waits for it; a `failed` that throws leaves the error as it came; the record keeps the events' order", async () => {
    const first = { done: false, value: new SseEvent(RAWS[0]!) } as const;
    const boom = new Error("boom");
    const texts: string[] = [];
    let letGo!: () => void;
    const slow: Ends = {
      failed: () =>
        new Promise<undefined>((r) => {
          letGo = () => r(undefined);
        }),
      done: async (t) => void texts.push(t),
    };
    const pull = (fail?: unknown) => {
      const { it } = events(["data: b\n\n"], fail);
      return Object.assign(it, {
        [PULL](ok: (r: IteratorResult<SseEvent>) => void, no: (e: unknown) => void) {
          it.next().then(ok, no);
        },
      });
    };
    const a = (passThrough(pull(boom), first, slow) as unknown as AsyncIterable<Uint8Array>)[
      Symbol.asyncIterator
    ]();
    await a.next();
    await a.next();
    const failing = a.next().catch((e) => e);
    await new Promise((r) => setImmediate(r));
    const after = a.next().catch((e) => e); // asked for while `failed` runs
    letGo();
    expect(await failing).toBe(boom);
    expect(await after).toBe(boom);
    expect(texts).toEqual([]);
    const throwing: Ends = {
      failed: async () => {
        throw new Error("failed itself failed");
      },
      done: async (t) => void texts.push(t),
    };
    const b = (passThrough(pull(boom), first, throwing) as unknown as AsyncIterable<Uint8Array>)[
      Symbol.asyncIterator
    ]();
    await b.next();
    await b.next();
    await expect(b.next()).rejects.toBe(boom);
    await expect(b.next()).rejects.toBe(boom);
    expect(texts).toEqual([]);
    // Two reads asked for at once, the second answered at once: recorded in order.
    const c = (passThrough(pull(), first, slow) as unknown as AsyncIterable<Uint8Array>)[
      Symbol.asyncIterator
    ]();
    await Promise.all([c.next(), c.next(), c.next()]);
    expect(texts).toEqual([`${RAWS[0]}data: b\n\n`]);
  });
});
