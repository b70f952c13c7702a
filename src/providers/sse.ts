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

  /** The events it is: itself (a run holds several). */
  events(): readonly SseEvent[] {
    return [this];
  }

  /** Whether its data is not JSON where a JSON stream sends JSON: data that does not start
   * like JSON (`{`, `[`: `[DONE]` among them; an event without data is not this), or that
   * did not parse when it was parsed. Reads the text, not the fields: cheap for every event. */
  get malformed(): boolean {
    if (this.#parsed) return this.#json === undefined && !["", "[DONE]"].includes(this.data.trim());
    const raw = this.raw;
    let at: number;
    if (raw.startsWith("data:")) at = 5;
    else {
      const line = raw.indexOf("\ndata:");
      if (line === -1) return false; // no data: a comment, a keepalive
      at = line + 6;
    }
    if (raw.charCodeAt(at) === 32) at++;
    return !startsJsonOrEnds(raw.charCodeAt(at));
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

const DATA = Buffer.from("data:");

/**
 * Whole events that carry no mark (no usage, no error), as one network read brought them
 * once the stream's content flows: handed on as they came, not split or parsed, and read
 * into events only when asked (the answer so far, the checks at the end). Most of a
 * stream's chunks come this way.
 */
export class SseRun {
  /** The read's bytes, as they came. */
  readonly bytes: Uint8Array;
  #events: readonly SseEvent[] | undefined;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }

  /** Its text (decoded on each ask: a run keeps no text of its own). */
  get raw(): string {
    return WHOLE.decode(this.bytes);
  }

  /** Whether one of its events' data is not JSON (as `SseEvent.malformed` reads it): each
   * `data:` that starts a line, found natively in the bytes, the byte after it looked at
   * (inside JSON a `data:` never starts a line: a string's newline is escaped). */
  get malformed(): boolean {
    const b = Buffer.from(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
    for (let i = b.indexOf(DATA); i !== -1; i = b.indexOf(DATA, i + 5)) {
      if (i > 0 && b[i - 1] !== 10 && b[i - 1] !== 13) continue; // "metadata:" in a text
      const at = b[i + 5] === 32 ? i + 6 : i + 5;
      if (!startsJsonOrEnds(b[at] ?? Number.NaN)) return true;
    }
    return false;
  }

  /** The events in it, in order (split once, when first asked). */
  events(): readonly SseEvent[] {
    if (this.#events !== undefined) return this.#events;
    const out: SseEvent[] = [];
    const text = this.raw;
    const rest = cutEvents(text, text.indexOf("\r") === -1, (raw) => out.push(new SseEvent(raw)));
    if (rest !== "") out.push(new SseEvent(rest)); // cannot happen: a run ends an event
    this.#events = out;
    return out;
  }
}

/** What the reader yields: an event, or (once content flows) a run of unmarked events. */
export type SseChunk = SseEvent | SseRun;

/** The events in `chunks`, in order. */
export function eventsOf(chunks: readonly SseChunk[]): SseEvent[] {
  const out: SseEvent[] = [];
  for (const c of chunks) for (const e of c.events()) out.push(e);
  return out;
}

/** What lets the reader hand whole reads on unsplit once content flows: which event is
 * content (from the read after it on), and the marks of an event that may carry usage or
 * an error (a read that matches one is split into its events, as before content). */
export interface Tail {
  content(event: SseEvent): boolean;
  readonly marks: readonly RegExp[];
  /** The marks find in a read's bytes, one character each, what they find in its text
   * (`bytewise`, src/providers/marks.ts): they are tested so, skipping a UTF-8 decode. */
  readonly bytewise: boolean;
}

const DONE: IteratorResult<SseChunk> = { done: true, value: undefined };

/** The end of an event: a line break and then a blank line, each in any of the three
 * styles SSE allows, mixed too (`\n\r\n`). A lone `\r` ends the first line only when no
 * `\n` follows it (else the two are one `\r\n`). */
const BOUNDARY = /(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r)/;

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
): Events<SseChunk>;
export function sseEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
  look?: (event: SseEvent) => boolean,
  tail?: Tail,
): Events<SseChunk> {
  return new SseReader(body, look, tail);
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

  constructor(
    body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
    look?: (event: SseEvent) => boolean,
    tail?: Tail,
  ) {
    this.#look = look;
    this.#tail = tail;
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
    if (this.#done) return Promise.resolve(DONE);
    return this.#source.next().then(this.#onRead);
  }

  /** `next()` with no promise of its own (see PULL): one read of the body a turn. */
  [PULL](ok: (r: IteratorResult<SseChunk>) => void, fail: (error: unknown) => void): void {
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
    if (rest === "") return DONE;
    return this.#give(new SseEvent(rest));
  }

  /** Splits a read into events; the common case (one whole event in one read, nothing held
   * from before) is returned as it is, queued nowhere. */
  #split(bytes: Uint8Array): SseChunk | undefined {
    // Nothing held from before: no text in the buffer, no half character in the decoder.
    const fresh = this.#buffer === "" && this.#clean;
    const breaks = endsInBreak(bytes);
    // Once content flows, a read of whole events that no mark matches goes on as it came
    // (while the look still looks, each event is shown it).
    if (
      this.#flowing &&
      fresh &&
      this.#look === undefined &&
      endsEvent(bytes) &&
      !marked(this.#tail!, bytes)
    )
      return new SseRun(bytes);
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
    this.#buffer = cutEvents(buffer, plain, (raw, last) => {
      // One event in one read, as servers mostly send them: its bytes go on as they came
      // (ending in a line break, they hold no half of a character the decoder keeps).
      const whole = fresh && last && this.#ready.length === 0 && breaks;
      this.#ready.push(new SseEvent(raw, whole ? bytes : undefined));
    });
    return undefined;
  }

  async return(): Promise<IteratorResult<SseChunk>> {
    this.#done = true;
    await this.#source.return?.();
    return { done: true, value: undefined };
  }
}

/** TextDecoder's options for a read that may end inside a character (made once). */
const STREAMING = { stream: true } as const;
/** Decodes reads that hold whole characters only; a mark at their start is text. */
const WHOLE = new TextDecoder("utf-8", { ignoreBOM: true });

/** Cuts the whole events off the front of `text`, each handed to `take` (`last`: it ends
 * the text), and returns what is left: the start of an event still to come. */
function cutEvents(
  text: string,
  plain: boolean,
  take: (raw: string, last: boolean) => void,
): string {
  for (let end = boundaryEnd(text, plain); end !== -1; end = boundaryEnd(text, plain)) {
    take(text.slice(0, end), end === text.length);
    text = text.slice(end);
  }
  return text;
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

/** Whether a read ends an event: a blank line at its very end, in `\n` or `\r\n` style,
 * after a line with something on it (a read that ends in `\r` may go on with `\n` in the
 * next; in one that ends in three breaks, an earlier boundary takes part of the last
 * blank line; a read that begins with the second half of a blank line is not looked into:
 * each of these is split). */
function endsEvent(b: Uint8Array): boolean {
  const n = b.length;
  if (n < 2 || b[n - 1] !== 10) return false;
  if (b[n - 2] === 10) return !isBreak(b, n - 3);
  return b[n - 2] === 13 && n >= 4 && b[n - 3] === 10 && b[n - 4] === 13 && !isBreak(b, n - 5);
}

const isBreak = (b: Uint8Array, i: number) => i >= 0 && (b[i] === 10 || b[i] === 13);

/** Whether any mark matches a read (whole events, so whole characters): on its bytes one
 * character each where the marks read the same so, else on its text. */
function marked(tail: Tail, bytes: Uint8Array): boolean {
  const text = tail.bytewise ? LATIN1.call(bytes, 0, bytes.length) : WHOLE.decode(bytes);
  const marks = tail.marks;
  for (let i = 0; i < marks.length; i++) if (marks[i]!.test(text)) return true;
  return false;
}

/** Node's one-character-a-byte decoder (what `toString("latin1")` runs): a copy, where
 * UTF-8 decoding validates and converts (half the cost of a mark test). */
const LATIN1: (this: Uint8Array, start: number, end: number) => string =
  (Buffer.prototype as unknown as { latin1Slice?: typeof LATIN1 }).latin1Slice ??
  function (this: Uint8Array) {
    return Buffer.from(this.buffer, this.byteOffset, this.byteLength).toString("latin1");
  };

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

/** A data line's first character: `{` or `[` (JSON, `[DONE]`), or the line or the text
 * ends there (no data). */
function startsJsonOrEnds(c: number): boolean {
  return c === 123 || c === 91 || c === 10 || c === 13 || Number.isNaN(c);
}
