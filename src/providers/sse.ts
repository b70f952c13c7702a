import { CUTS_READS, PULL } from "../internal.ts";

/**
 * One server-sent event as it came over the wire: its raw text (passed on verbatim, so the
 * SDK parses exactly what the server sent) and, read on demand, its name and data.
 */
export class SseEvent {
  readonly raw: string;
  /** The bytes it came in, when it came as one network read of its own (passed on as
   * they are, not encoded again). */
  readonly bytes: Uint8Array | undefined;
  #data: string | undefined;
  #event: string | undefined;
  #json: unknown;
  #parsed = false;

  constructor(raw: string, bytes?: Uint8Array) {
    this.raw = raw;
    this.bytes = bytes;
  }

  #fields(): void {
    if (this.#data !== undefined) return;
    const data: string[] = [];
    for (const line of this.raw.split(/\r\n|\r|\n/)) {
      if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5));
      else if (line.startsWith("event:")) this.#event = line.slice(6).trim();
    }
    this.#data = data.join("\n");
  }

  /** The `event:` field, if any. */
  get event(): string | undefined {
    this.#fields();
    return this.#event;
  }

  /** The `data:` lines joined. */
  get data(): string {
    this.#fields();
    return this.#data!;
  }

  /** The data parsed as JSON; undefined when it is not JSON (a comment, `[DONE]`). */
  get json(): unknown {
    if (!this.#parsed) {
      this.#parsed = true;
      const d = this.data;
      if (d.startsWith("{") || d.startsWith("[")) {
        try {
          this.#json = JSON.parse(d);
        } catch {}
      }
    }
    return this.#json;
  }
}

const DONE: IteratorResult<SseEvent> = { done: true, value: undefined };

/** The end of an event: a blank line in any of the three line-break styles SSE allows. */
const BOUNDARY = /\r\n\r\n|\n\n|\r\r/;

/**
 * Splits a byte stream into events. A trailing piece with no blank line after it is still
 * yielded (some servers end without one), so no byte the server sent is dropped. An
 * iterator of its own rather than a generator: it runs once per event of every stream.
 */
export function sseEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
  look?: (event: SseEvent) => boolean,
): AsyncIterableIterator<SseEvent> & { return(): Promise<IteratorResult<SseEvent>> } {
  return new SseReader(body, look);
}

class SseReader implements AsyncIterableIterator<SseEvent> {
  readonly #decoder = new TextDecoder();
  readonly #source: AsyncIterator<Uint8Array>;
  #buffer = "";
  readonly #ready: SseEvent[] = [];
  #at = 0;
  #done = false;
  /** The last read ended on a line break: the decoder holds no half of a character. */
  #clean = true;
  /** A read was decoded: a byte-order mark now is text, not the stream's mark. */
  #started = false;

  /** Shown each event until it returns true (it has seen what it looks for). */
  #look: ((event: SseEvent) => boolean) | undefined;

  constructor(
    body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
    look?: (event: SseEvent) => boolean,
  ) {
    this.#look = look;
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

  next(): Promise<IteratorResult<SseEvent>> {
    if (this.#at < this.#ready.length) return Promise.resolve(this.#take());
    if (this.#done) return Promise.resolve(DONE);
    return this.#source.next().then(this.#onRead);
  }

  /** `next()` with no promise of its own (see PULL): one read of the body a turn. */
  [PULL](ok: (r: IteratorResult<SseEvent>) => void, fail: (error: unknown) => void): void {
    if (this.#at < this.#ready.length) {
      ok(this.#take());
      return;
    }
    if (this.#done) {
      ok(DONE);
      return;
    }
    this.#ok = ok;
    this.#fail = fail;
    this.#source.next().then(this.#onPulled, this.#onPullFailed);
  }

  #ok: ((r: IteratorResult<SseEvent>) => void) | undefined;
  #fail: ((error: unknown) => void) | undefined;

  readonly #onPulled = (r: IteratorResult<Uint8Array>): void => {
    let out: IteratorResult<SseEvent> | undefined;
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

  #take(): IteratorResult<SseEvent> {
    const e = this.#ready[this.#at++]!;
    if (this.#at === this.#ready.length) {
      this.#ready.length = 0;
      this.#at = 0;
    }
    return this.#give(e);
  }

  #give(e: SseEvent): IteratorResult<SseEvent> {
    if (this.#look !== undefined) {
      // A look that throws (a dialect's reader) stops looking; the stream goes on.
      let seen = true;
      try {
        seen = this.#look(e);
      } catch {}
      if (seen) this.#look = undefined;
    }
    return { done: false, value: e };
  }

  /** One network read: the next event, or another read when it held no whole event. */
  readonly #onRead = (
    r: IteratorResult<Uint8Array>,
  ): IteratorResult<SseEvent> | Promise<IteratorResult<SseEvent>> =>
    this.#fromRead(r) ?? this.#source.next().then(this.#onRead);

  /** The next event a network read gives, or undefined when it held no whole one. */
  #fromRead(r: IteratorResult<Uint8Array>): IteratorResult<SseEvent> | undefined {
    if (r.done) return this.#end();
    const one = this.#split(r.value);
    if (one !== undefined) return this.#give(one);
    if (this.#at < this.#ready.length) return this.#take();
    return undefined;
  }

  #end(): IteratorResult<SseEvent> {
    this.#done = true;
    const rest = this.#buffer + this.#decoder.decode();
    this.#buffer = "";
    if (rest === "") return DONE;
    return this.#give(new SseEvent(rest));
  }

  /** Splits a read into events; the common case (one whole event in one read, nothing held
   * from before) is returned as it is, queued nowhere. */
  #split(bytes: Uint8Array): SseEvent | undefined {
    // Nothing held from before: no text in the buffer, no half character in the decoder.
    const fresh = this.#buffer === "" && this.#clean;
    const breaks = endsInBreak(bytes);
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
    let buffer = this.#buffer === "" ? text : this.#buffer + text;
    for (let end = boundaryEnd(buffer, plain); end !== -1; end = boundaryEnd(buffer, plain)) {
      // One event in one read, as servers mostly send them: its bytes go on as they came
      // (ending in a line break, they hold no half of a character the decoder keeps).
      const whole = fresh && end === buffer.length && this.#ready.length === 0 && breaks;
      this.#ready.push(new SseEvent(buffer.slice(0, end), whole ? bytes : undefined));
      buffer = buffer.slice(end);
    }
    this.#buffer = buffer;
    return undefined;
  }

  async return(): Promise<IteratorResult<SseEvent>> {
    this.#done = true;
    await this.#source.return?.();
    return { done: true, value: undefined };
  }
}

/** TextDecoder's options for a read that may end inside a character (made once). */
const STREAMING = { stream: true } as const;
/** Decodes reads that hold whole characters only; a mark at their start is text. */
const WHOLE = new TextDecoder("utf-8", { ignoreBOM: true });

/** Where the first event of `buffer` ends (after its blank line), or -1. */
function boundaryEnd(buffer: string, plain: boolean): number {
  if (plain) {
    const at = buffer.indexOf("\n\n");
    return at === -1 ? -1 : at + 2;
  }
  const m = BOUNDARY.exec(buffer);
  return m === null ? -1 : m.index + m[0].length;
}

const endsInBreak = (b: Uint8Array) =>
  b.length > 0 && (b[b.length - 1] === 10 || b[b.length - 1] === 13);

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
