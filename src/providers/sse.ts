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

/** The end of an event: a blank line in any of the three line-break styles SSE allows. */
const BOUNDARY = /\r\n\r\n|\n\n|\r\r/;

/**
 * Splits a byte stream into events. A trailing piece with no blank line after it is still
 * yielded (some servers end without one), so no byte the server sent is dropped. An
 * iterator of its own rather than a generator: it runs once per event of every stream.
 */
export function sseEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
): AsyncIterableIterator<SseEvent> & { return(): Promise<IteratorResult<SseEvent>> } {
  return new SseReader(body);
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

  constructor(body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>) {
    // A ReadableStream is read through its reader here, not through one more generator.
    this.#source =
      Symbol.asyncIterator in body
        ? (body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]()
        : readerOf((body as ReadableStream<Uint8Array>).getReader());
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<SseEvent>> {
    if (this.#at < this.#ready.length) return Promise.resolve(this.#take());
    if (this.#done) return Promise.resolve({ done: true, value: undefined });
    return this.#fill();
  }

  #take(): IteratorResult<SseEvent> {
    const e = this.#ready[this.#at++]!;
    if (this.#at === this.#ready.length) {
      this.#ready.length = 0;
      this.#at = 0;
    }
    return { done: false, value: e };
  }

  async #fill(): Promise<IteratorResult<SseEvent>> {
    while (this.#at >= this.#ready.length) {
      const r = await this.#source.next();
      if (r.done) {
        this.#done = true;
        const rest = this.#buffer + this.#decoder.decode();
        this.#buffer = "";
        if (rest === "") return { done: true, value: undefined };
        return { done: false, value: new SseEvent(rest) };
      }
      this.#split(r.value);
    }
    return this.#take();
  }

  #split(bytes: Uint8Array): void {
    // Nothing held from before: no text in the buffer, no half character in the decoder.
    const fresh = this.#buffer === "" && this.#clean;
    const breaks = endsInBreak(bytes);
    this.#clean = breaks;
    const text = this.#decoder.decode(bytes, { stream: true });
    let buffer = this.#buffer === "" ? text : this.#buffer + text;
    // Servers mostly end lines with \n alone: then a literal search finds each boundary.
    const plain = buffer.indexOf("\r") === -1;
    for (let end = boundaryEnd(buffer, plain); end !== -1; end = boundaryEnd(buffer, plain)) {
      // One event in one read, as servers mostly send them: its bytes go on as they came
      // (ending in a line break, they hold no half of a character the decoder keeps).
      const whole = fresh && end === buffer.length && this.#ready.length === 0 && breaks;
      this.#ready.push(new SseEvent(buffer.slice(0, end), whole ? bytes : undefined));
      buffer = buffer.slice(end);
    }
    this.#buffer = buffer;
  }

  async return(): Promise<IteratorResult<SseEvent>> {
    this.#done = true;
    await this.#source.return?.();
    return { done: true, value: undefined };
  }
}

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
