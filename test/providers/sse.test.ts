import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CUTS_READS, PULL, type Pullable } from "../../src/policy/stream-head.ts";
import { type SseEvent, sseEvents } from "../../src/providers/sse.ts";

/** Enough runs to meet a read that ends inside a character right after an event. */
const NUM_RUNS = Number(process.env.SSE_RUNS ?? 1_000);

/** A body that sends `bytes` in reads cut at `cuts`. */
function body(bytes: Uint8Array, cuts: number[]): ReadableStream<Uint8Array> {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  return new ReadableStream({
    start(c) {
      let from = 0;
      for (const to of [...at, bytes.length]) {
        if (to > from) c.enqueue(bytes.slice(from, to));
        from = to;
      }
      c.close();
    },
  });
}

const concat = (parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    out.set(p, i);
    i += p.length;
  }
  return out;
};

describe("sseEvents", () => {
  it("splits on a blank line in each of SSE's three line-break styles and keeps a trailing piece", async () => {
    const text = 'data: {"a":1}\n\nevent: ping\r\ndata: x\r\n\r\ndata: é\r\rdata: [DONE]';
    const events = [];
    for await (const e of sseEvents(body(new TextEncoder().encode(text), [3, 17, 30])))
      events.push(e);
    expect(events.map((e) => e.data)).toEqual(['{"a":1}', "x", "é", "[DONE]"]);
    expect(events.map((e) => e.event)).toEqual([undefined, "ping", undefined, undefined]);
    expect(events[0]!.json).toEqual({ a: 1 });
    expect(events.map((e) => e.raw).join("")).toBe(text);
  });

  it("an event that came as one read of its own keeps its bytes; the rest are re-encoded", async () => {
    const parts = ["data: one\n\n", "data: two\n\ndata: three\n\n", "data: fo", "ur\n\n"];
    const enc = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of parts) c.enqueue(enc.encode(p));
        c.close();
      },
    });
    const seen: [string, boolean][] = [];
    for await (const e of sseEvents(stream)) seen.push([e.data, e.bytes !== undefined]);
    expect(seen).toEqual([
      ["one", true],
      ["two", false],
      ["three", false],
      ["four", false],
    ]);
  });

  it("a read that ends inside a character after an event does not pass that half on twice", async () => {
    const bytes = new TextEncoder().encode("data: a\n\né\ndata: b\n\ndata: c\n\n");
    const cut = bytes.indexOf(0xc3) + 1; // between the two bytes of "é"
    const out: Uint8Array[] = [];
    for await (const e of sseEvents(body(bytes, [cut])))
      out.push(e.bytes ?? new TextEncoder().encode(e.raw));
    expect(Buffer.from(concat(out)).equals(Buffer.from(bytes))).toBe(true);
  });

  it("an event whose first character began in the read before keeps none of its bytes", async () => {
    const bytes = new TextEncoder().encode("🙂é\n\n     data: {}");
    const out: Uint8Array[] = [];
    for await (const e of sseEvents(body(bytes, [1, 8])))
      out.push(e.bytes ?? new TextEncoder().encode(e.raw));
    expect(Buffer.from(concat(out)).equals(Buffer.from(bytes))).toBe(true);
  });

  it("property: whatever the reads, the bytes passed on are the bytes that came, and the texts the text", async () => {
    const piece = fc.oneof(
      fc.string(),
      fc.constantFrom(
        "é",
        "日本",
        "🙂",
        "\n",
        "\r",
        "\r\n",
        "\n\n",
        "\r\n\r\n",
        "data: ",
        "data: {}",
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(piece, { maxLength: 30 }),
        fc.array(fc.nat(400), { maxLength: 12 }),
        async (pieces, cuts) => {
          const text = pieces.join("");
          const bytes = new TextEncoder().encode(text);
          const out: Uint8Array[] = [];
          const raws: string[] = [];
          const enc = new TextEncoder();
          for await (const e of sseEvents(body(bytes, cuts))) {
            raws.push(e.raw);
            out.push(e.bytes ?? enc.encode(e.raw));
          }
          expect(raws.join("")).toBe(new TextDecoder().decode(bytes));
          expect(Buffer.from(concat(out)).equals(Buffer.from(bytes))).toBe(true);
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });

  it("a ReadableStream is read through its reader: closing the events ends a read still pending, so a cut needs no race", async () => {
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
        c.enqueue(new TextEncoder().encode("data: a\n\n"));
      },
    });
    const events = sseEvents(stream);
    expect((events as unknown as Record<symbol, unknown>)[CUTS_READS]).toBe(true);
    expect((await events.next()).value?.data).toBe("a");
    const pending = events.next(); // nothing more comes
    await events.return();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(() => controller.enqueue(new Uint8Array(1))).toThrow(); // the body was cancelled
    // Any other iterable may hold a read it cannot end: it says nothing.
    const gen = (async function* () {
      yield new TextEncoder().encode("data: b\n\n");
    })();
    expect((sseEvents(gen) as unknown as Record<symbol, unknown>)[CUTS_READS]).toBe(false);
  });

  it("a byte-order mark is taken off the stream's start only: one that begins a later read is text", async () => {
    const enc = new TextEncoder();
    const reads = [enc.encode("\uFEFFdata: a\n\n"), enc.encode("\uFEFFdata: b\n\n")];
    const raws: string[] = [];
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (const r of reads) c.enqueue(r);
        c.close();
      },
    });
    for await (const e of sseEvents(stream)) raws.push(e.raw);
    expect(raws).toEqual(["data: a\n\n", "\uFEFFdata: b\n\n"]);
    expect(raws.join("")).toBe(new TextDecoder().decode(concat(reads)));
  });

  it("property: read by PULL (a callback a read), the events are the ones next() gives", async () => {
    const piece = fc.constantFrom("é", "🙂", "\n", "\r\n", "\n\n", "\r\r", "data: ", "x");
    const read = async (events: AsyncIterator<SseEvent>, byPull: boolean) => {
      const out: [string, number | undefined][] = [];
      for (;;) {
        const r = byPull
          ? await new Promise<IteratorResult<SseEvent>>((ok, fail) =>
              (events as Pullable<SseEvent>)[PULL](ok, fail),
            )
          : await events.next();
        if (r.done) return out;
        out.push([r.value.raw, r.value.bytes?.length]);
      }
    };
    await fc.assert(
      fc.asyncProperty(
        fc.array(piece, { maxLength: 30 }),
        fc.array(fc.nat(200), { maxLength: 12 }),
        async (pieces, cuts) => {
          const bytes = new TextEncoder().encode(pieces.join(""));
          const byNext = await read(sseEvents(body(bytes, cuts)), false);
          expect(await read(sseEvents(body(bytes, cuts)), true)).toEqual(byNext);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a read of a lone line break is no event of its own; a look that throws stops looking, the events go on", async () => {
    const enc = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (const r of ["data: a\n\n", "\n", "data: b\n\n", "data: c\n\n"])
          c.enqueue(enc.encode(r));
        c.close();
      },
    });
    let looks = 0;
    const raws: string[] = [];
    const look = () => {
      looks++;
      throw new Error("a dialect's reader that throws");
    };
    for await (const e of sseEvents(stream, look)) raws.push(e.raw);
    expect(raws).toEqual(["data: a\n\n", "\ndata: b\n\n", "data: c\n\n"]);
    expect(looks).toBe(1);
  });
});
