import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CUTS_READS, PULL, type Pullable } from "../../src/policy/stream-head.ts";
import {
  eventsOf,
  type SseChunk,
  type SseEvent,
  SseRun,
  sseEvents,
  type Tail,
} from "../../src/providers/sse.ts";

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

  it("a blank line whose breaks mix styles ends an event too, as the SDKs read it; one \r\n is one break", async () => {
    const text = 'data: {"a":1}\n\r\ndata: {"b":2}\r\n\ndata: {"c":3}\r\r\ndata: x\r\ny\n\n';
    for (const cuts of [[], [14], [15, 30], [46, 47]]) {
      const events = [];
      for await (const e of sseEvents(body(new TextEncoder().encode(text), cuts))) events.push(e);
      expect(events.map((e) => e.data)).toEqual(['{"a":1}', '{"b":2}', '{"c":3}', "x"]);
      expect(events.map((e) => e.raw).join("")).toBe(text);
    }
  });

  it("an event that came as one read of its own, or as part of an ASCII read, keeps its bytes; the rest are re-encoded", async () => {
    const parts = [
      "data: one\n\n",
      "data: two\n\ndata: three\n\n",
      "data: fo",
      "ur\n\n",
      "data: é\n\ndata: six\n\n",
    ];
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
      ["two", true],
      ["three", true],
      ["four", false],
      ["é", false],
      ["six", false],
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

/** Reads every chunk. */
async function all<C>(it: AsyncIterable<C>): Promise<C[]> {
  const out: C[] = [];
  for await (const c of it) out.push(c);
  return out;
}

describe("sseEvents with a tail: once content flows, whole reads no mark matches go on as runs", () => {
  const enc = new TextEncoder();
  // Content is an event whose data says "c"; usage and errors are what the marks find.
  const tail: Tail = {
    content: (e) => e.data.includes("c"),
    marks: [/usage|error/],
    bytewise: true,
  };
  const reads = (parts: string[]) =>
    new ReadableStream<Uint8Array>({
      start(ctl) {
        for (const p of parts) ctl.enqueue(enc.encode(p));
        ctl.close();
      },
    });

  it("events until the first content, then runs of whole reads; marked, cut or \\r-ended reads are split as before", async () => {
    const parts = [
      "data: role\n\n", // before content: an event
      "data: c1\n\n", // the first content: an event
      "data: c2\n\ndata: c3\n\n", // two whole events, no mark: one run
      "data: usage 5\n\n", // a mark: an event
      "data: c4\n", // cut inside an event: split
      "\ndata: c5\r\n\r\n", // ends the one before, and one more: split (it was held)
      "data: c6\r\n\r\n", // whole, in the other style: a run
      "data: error\n\n", // a mark: an event
    ];
    const chunks = await all(sseEvents(reads(parts), undefined, tail));
    expect(chunks.map((c) => (c instanceof SseRun ? `run(${c.raw})` : c.raw))).toEqual([
      "data: role\n\n",
      "data: c1\n\n",
      "run(data: c2\n\ndata: c3\n\n)",
      "data: usage 5\n\n",
      "data: c4\n\n",
      "data: c5\r\n\r\n",
      "run(data: c6\r\n\r\n)",
      "data: error\n\n",
    ]);
    const run = chunks[2] as SseRun;
    expect(run.bytes).toEqual(enc.encode(parts[2]!)); // the read's own bytes, as they came
    expect(run.events().map((e) => e.data)).toEqual(["c2", "c3"]);
    expect(run.events()).toBe(run.events()); // split once
    expect(eventsOf(chunks).map((e) => e.data)).toEqual([
      "role",
      "c1",
      "c2",
      "c3",
      "usage 5",
      "c4",
      "c5",
      "c6",
      "error",
    ]);
  });

  it("a read that ends in \r\r is split (its last \r may begin a \r\n), and no run comes while the look still looks", async () => {
    // The first \r\r ends an event; the third \r and the next read's \n are one line break.
    const parts = ["data: c日本\n\n", "\r\r\r", "\n"];
    const plain = await all(sseEvents(reads(parts)));
    const chunks = await all(sseEvents(reads(parts), undefined, tail));
    expect(chunks.some((c) => c instanceof SseRun)).toBe(false);
    expect(eventsOf(chunks).map((e) => e.raw)).toEqual(plain.map((e) => e.raw));
    // A read that ends in three breaks: an earlier boundary takes part of its last blank line.
    for (const three of [
      ["data: c1\n\n", "data: b\n\n\n", "\ndata: c\n\n"],
      ["data: c1\n\n", "data: b\r\n\r\n\r\n", "data: c\n\n"],
    ]) {
      const want = (await all(sseEvents(reads(three)))).map((e) => e.raw);
      const got = await all(sseEvents(reads(three), undefined, tail));
      expect(got.some((c) => c instanceof SseRun)).toBe(false);
      expect(eventsOf(got).map((e) => e.raw)).toEqual(want);
    }
    // A look (the answering model) is shown each event until it has seen what it looks for.
    const seen: string[] = [];
    const look = (e: SseEvent) => {
      seen.push(e.data);
      return seen.length === 3;
    };
    const three = ["data: c1\n\n", "data: c2\n\n", "data: c3\n\n", "data: c4\n\n"];
    const looked = await all(sseEvents(reads(three), look, tail));
    expect(seen).toEqual(["c1", "c2", "c3"]);
    expect(looked.map((c) => c instanceof SseRun)).toEqual([false, false, false, true]);
  });

  it("a dialect reading that throws reads as content: the runs begin after it", async () => {
    const throwing: Tail = {
      content: () => {
        throw new Error("a dialect's reader that throws");
      },
      marks: [/usage/],
      bytewise: true,
    };
    const chunks = await all(sseEvents(reads(["data: a\n\n", "data: b\n\n"]), undefined, throwing));
    expect(chunks.map((c) => c instanceof SseRun)).toEqual([false, true]);
  });

  it("property: whatever the reads and marks, the bytes are the bytes that came, the events the events, and no run holds a marked event or comes before content", async () => {
    const piece = fc.oneof(
      fc.constantFrom("é", "日本", "🙂", "\n", "\r", "\r\n", "\n\n", "\r\n\r\n", "\r\r"),
      fc.constantFrom("data: ", "data: c", "data: x", "usage", "error", "event: e\n"),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(piece, { maxLength: 40 }),
        fc.array(fc.nat(300), { maxLength: 16 }),
        async (pieces, cuts) => {
          const bytes = enc.encode(pieces.join(""));
          const plain = await all(sseEvents(body(bytes, cuts)));
          const chunks: SseChunk[] = await all(sseEvents(body(bytes, cuts), undefined, tail));
          const out = chunks.map((c) => c.bytes ?? enc.encode(c.raw));
          expect(Buffer.from(concat(out)).equals(Buffer.from(bytes))).toBe(true);
          expect(eventsOf(chunks).map((e) => e.raw)).toEqual(plain.map((e) => e.raw));
          const firstContent = chunks.findIndex((c) => !(c instanceof SseRun) && tail.content(c));
          chunks.forEach((c, i) => {
            if (!(c instanceof SseRun)) return;
            expect(i).toBeGreaterThan(firstContent);
            expect(firstContent).toBeGreaterThanOrEqual(0);
            for (const e of c.events()) expect(/usage|error/.test(e.raw)).toBe(false);
          });
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });
});
