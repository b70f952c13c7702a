import { CUTS_READS, PULL } from "../internal.ts";
import { cutEvents, SseEvent, STREAMING, WHOLE } from "./sse-event.ts";
import { runOf, SseRun, type Tail } from "./sse-runs.ts";

export { SseEvent } from "./sse-event.ts";
export { SseRun, type Tail } from "./sse-runs.ts";

/** What the reader yields: an event, or (once content flows) a run of unmarked events. */
export type SseChunk = SseEvent | SseRun;

/** The events in `chunks`, in order. */
export function eventsOf(chunks: readonly SseChunk[]): SseEvent[] {
  const out: SseEvent[] = [];
  for (const c of chunks) for (const e of c.events()) out.push(e);
  return out;
}

const DONE: IteratorResult<SseChunk> = { done: true, value: undefined };

/**
 * Splits a byte stream into events. A trailing piece with no blank line after it is still
 * yielded (some servers end without one), so no byte the server sent is dropped. An
 * iterator of its own rather than a generator: it runs once per event of every stream.
 */
export function sseEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
  look?: (event: SseEvent) => boolean,
): Events<SseEvent>;
/** With `tail`: once content flows, whole reads that match no mark come as runs. */
export function sseEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
  look: ((event: SseEvent) => boolean) | undefined,
  tail: Tail | undefined,
  finished?: (event: SseEvent) => boolean,
): Events<SseChunk>;
export function sseEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
  look?: (event: SseEvent) => boolean,
  tail?: Tail,
  finished?: (event: SseEvent) => boolean,
): Events<SseChunk> {
  return new SseReader(body, look, tail, finished);
}

/** A stream whose body ended before its answer did (`Dialect.finished`): the upstream's
 * failure, as a cut is, though the connection closed cleanly. */
export class UnfinishedStream extends Error {
  readonly error = { type: "server_error", code: "stream_unfinished" };
  constructor() {
    super("the stream ended before its answer did (no end event, no finish reason)");
  }
}

type Events<C> = AsyncIterableIterator<C> & { return(): Promise<IteratorResult<C>> };

class SseReader implements AsyncIterableIterator<SseChunk> {
  readonly #decoder = new TextDecoder();
  readonly #source: AsyncIterator<Uint8Array>;
  #buffer = "";
  readonly #ready: SseChunk[] = [];
  #at = 0;
  #done = false;
  /** The last read ended on a line break: the decoder holds no half of a character. */
  #clean = true;
  /** A read was decoded: a byte-order mark now is text, not the stream's mark. */
  #started = false;

  /** Shown each event until it returns true (it has seen what it looks for). */
  #look: ((event: SseEvent) => boolean) | undefined;
  /** Asked of each event until one is content; then its marks test each whole read. */
  #tail: Tail | undefined;
  /** Content flowed: a whole read that matches no mark goes on as a run. */
  #flowing = false;
  /** Asked of the last event once the body ends: did the answer end with it? */
  #finished: ((event: SseEvent) => boolean) | undefined;
  #last: SseChunk | undefined;

  constructor(
    body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
    look?: (event: SseEvent) => boolean,
    tail?: Tail,
    finished?: (event: SseEvent) => boolean,
  ) {
    this.#look = look;
    this.#tail = tail;
    this.#finished = finished;
    // A ReadableStream is read through its reader here, not through one more generator;
    // cancelling the reader ends a read still pending, so a cut needs no race.
    const stream = typeof (body as ReadableStream<Uint8Array>).getReader === "function";
    this.#source = stream
      ? readerOf((body as ReadableStream<Uint8Array>).getReader())
      : (body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    this[CUTS_READS] = stream;
  }

  readonly [CUTS_READS]: boolean;

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<SseChunk>> {
    if (this.#at < this.#ready.length) return Promise.resolve(this.#take());
    if (this.#done) {
      try {
        return Promise.resolve(this.#over());
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return this.#source.next().then(this.#onRead);
  }

  /** `next()` with no promise of its own (see PULL): one read of the body a turn. */
  [PULL](ok: (r: IteratorResult<SseChunk>) => void, fail: (error: unknown) => void): void {
    if (this.#at < this.#ready.length) {
      ok(this.#take());
      return;
    }
    if (this.#done) {
      let end: IteratorResult<SseChunk>;
      try {
        end = this.#over();
      } catch (error) {
        fail(error);
        return;
      }
      ok(end);
      return;
    }
    this.#ok = ok;
    this.#fail = fail;
    this.#source.next().then(this.#onPulled, this.#onPullFailed);
  }

  #ok: ((r: IteratorResult<SseChunk>) => void) | undefined;
  #fail: ((error: unknown) => void) | undefined;

  readonly #onPulled = (r: IteratorResult<Uint8Array>): void => {
    let out: IteratorResult<SseChunk> | undefined;
    try {
      out = this.#fromRead(r);
    } catch (error) {
      this.#onPullFailed(error);
      return;
    }
    if (out === undefined) this.#source.next().then(this.#onPulled, this.#onPullFailed);
    else {
      const ok = this.#ok!;
      this.#ok = this.#fail = undefined;
      ok(out);
    }
  };

  readonly #onPullFailed = (error: unknown): void => {
    const fail = this.#fail!;
    this.#ok = this.#fail = undefined;
    fail(error);
  };

  #take(): IteratorResult<SseChunk> {
    const e = this.#ready[this.#at++]!;
    if (this.#at === this.#ready.length) {
      this.#ready.length = 0;
      this.#at = 0;
    }
    return this.#give(e);
  }

  #give(e: SseChunk): IteratorResult<SseChunk> {
    // The answer's end is judged on its last event with data: a keep-alive comment or a
    // blank line after `[DONE]` ends nothing.
    if (this.#finished !== undefined && (e instanceof SseRun || e.raw.includes("data:")))
      this.#last = e;
    if (e instanceof SseRun) return { done: false, value: e };
    if (this.#look !== undefined) {
      // A look that throws (a dialect's reader) stops looking; the stream goes on.
      let seen = true;
      try {
        seen = this.#look(e);
      } catch {}
      if (seen) this.#look = undefined;
    }
    if (this.#tail !== undefined && !this.#flowing) this.#flowing = isContent(this.#tail, e);
    return { done: false, value: e };
  }

  /** One network read: the next event, or another read when it held no whole event. */
  readonly #onRead = (
    r: IteratorResult<Uint8Array>,
  ): IteratorResult<SseChunk> | Promise<IteratorResult<SseChunk>> =>
    this.#fromRead(r) ?? this.#source.next().then(this.#onRead);

  /** The next event a network read gives, or undefined when it held no whole one. */
  #fromRead(r: IteratorResult<Uint8Array>): IteratorResult<SseChunk> | undefined {
    if (r.done) return this.#end();
    const one = this.#split(r.value);
    if (one !== undefined) return this.#give(one);
    if (this.#at < this.#ready.length) return this.#take();
    return undefined;
  }

  #end(): IteratorResult<SseChunk> {
    this.#done = true;
    const rest = this.#buffer + this.#decoder.decode();
    this.#buffer = "";
    if (rest === "") return this.#over();
    return this.#give(new SseEvent(rest)); // the next read is the end
  }

  /** The end, once the body ended: an UnfinishedStream, once, when the last event did not
   * end the answer (a `finished` that throws reads as ended: a reader's bug is no
   * upstream's failure). */
  #over(): IteratorResult<SseChunk> {
    const finished = this.#finished;
    if (finished === undefined) return DONE;
    this.#finished = undefined;
    const last = this.#last;
    const event =
      last instanceof SseRun ? last.events().findLast((e) => e.raw.includes("data:")) : last;
    let ended = false;
    try {
      ended = event !== undefined && finished(event);
    } catch {
      ended = true;
    }
    if (ended) return DONE;
    throw new UnfinishedStream();
  }

  /** Splits a read into events; the common case (one whole event in one read, nothing held
   * from before) is returned as it is, queued nowhere. */
  #split(bytes: Uint8Array): SseChunk | undefined {
    // Nothing held from before: no text in the buffer, no half character in the decoder.
    const fresh = this.#buffer === "" && this.#clean;
    const breaks = endsInBreak(bytes);
    // Once content flows, a read of whole events that no mark matches goes on as it came
    // (while the look still looks, each event is shown it).
    if (this.#flowing && fresh && this.#look === undefined) {
      const run = runOf(this.#tail!, bytes);
      if (run !== undefined) return run;
    }
    // A read that starts and ends on a whole character (the common case) is decoded on
    // its own, on the decoder's fast path; the streaming decoder keeps a character split
    // between reads, and takes the byte-order mark off the stream's start.
    const text =
      this.#clean && breaks && this.#started
        ? WHOLE.decode(bytes)
        : this.#decoder.decode(bytes, STREAMING);
    this.#started = true;
    this.#clean = breaks;
    // Servers mostly end lines with \n alone: then a literal search finds each boundary.
    const plain = text.indexOf("\r") === -1 && (fresh || this.#buffer.indexOf("\r") === -1);
    if (fresh && breaks && plain && text.length >= 2 && text.indexOf("\n\n") === text.length - 2)
      return new SseEvent(text, bytes);
    const buffer = this.#buffer === "" ? text : this.#buffer + text;
    // A fresh read all of ASCII (as many characters as bytes): each event's bytes are its
    // own part of the read, handed on as they came rather than encoded again.
    const ascii = fresh && text.length === bytes.length;
    let at = 0;
    this.#buffer = cutEvents(buffer, plain, (raw, last) => {
      // One event in one read, as servers mostly send them: its bytes go on as they came
      // (ending in a line break, they hold no half of a character the decoder keeps).
      const whole = fresh && last && this.#ready.length === 0 && breaks;
      const own = whole ? bytes : ascii ? bytes.subarray(at, at + raw.length) : undefined;
      at += raw.length;
      this.#ready.push(new SseEvent(raw, own));
    });
    return undefined;
  }

  async return(): Promise<IteratorResult<SseChunk>> {
    this.#done = true;
    this.#finished = undefined; // left by its reader: no end to judge
    await this.#source.return?.();
    return { done: true, value: undefined };
  }
}

const endsInBreak = (b: Uint8Array) =>
  b.length > 0 && (b[b.length - 1] === 10 || b[b.length - 1] === 13);

/** The dialect's reading of an event: one that throws reads as content, as the policy's
 * hook reads it (nothing is held back on a guess). */
function isContent(tail: Tail, e: SseEvent): boolean {
  try {
    return tail.content(e);
  } catch {
    return true;
  }
}

/** A reader's chunks as an iterator whose `next` is the reader's own `read`; returning
 * cancels the reader. */
function readerOf(reader: ReadableStreamDefaultReader<Uint8Array>): AsyncIterator<Uint8Array> {
  return {
    next: () => reader.read() as Promise<IteratorResult<Uint8Array>>,
    return: async () => {
      await reader.cancel().catch(() => {});
      return { done: true, value: undefined };
    },
  };
}
