import { PULL, type Pullable, pullable } from "../internal.ts";
import type { SseChunk } from "./sse.ts";

/** How a stream handed on ends: what a failure leaves the SDK to read, and the record of a
 * stream read to its end. */
export interface Ends {
  /** The text the SDK reads last after a failure (the error event, for the SDK to raise
   * its own error from), or undefined to fail the body with it. */
  failed(error: unknown): Promise<string | undefined>;
  /** Told the stream's whole text once it ended (a journaled run records it). */
  done?: (text: string) => Promise<void>;
  /** Whether a read's bytes end with the event after which the SDK stops reading and
   * lets the body go (openai's `data: [DONE]`): that read is held until the stream has
   * ended behind it, so its checks and its record come before the SDK's end, not never. */
  last?: (bytes: Uint8Array) => boolean;
}

const DONE: IteratorResult<Uint8Array> = { done: true, value: undefined };
const ENCODER = new TextEncoder();
/** TextDecoder's options for text that may end inside a character. */
const STREAMING = { stream: true } as const;

/**
 * The events' bytes as they came, from the first content on: the body the SDK reads. Each
 * read is one event's read of the policy's stream and nothing more: an SDK that iterates
 * the body (`for await`, as the openai and anthropic SDKs do) reads it straight, with no
 * stream between; any other reader (`getReader()`, `pipeTo`, a Response made of it) reads
 * the same through the body as a ReadableStream.
 */
export function passThrough(
  events: AsyncIterator<SseChunk> & { return(): Promise<unknown> },
  first: IteratorResult<SseChunk>,
  ends: Ends,
): ReadableStream<Uint8Array> {
  const bytes = new EventBytes(events, first, ends);
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let r: IteratorResult<Uint8Array>;
        try {
          r = await bytes.next();
        } catch (error) {
          return controller.error(error);
        }
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      },
      cancel: () => bytes.return().then(() => {}),
    },
    // Nothing is read before a consumer asks: the iterator below may be the one that reads.
    { highWaterMark: 0 },
  );
  Object.defineProperty(body, Symbol.asyncIterator, {
    value(): AsyncIterableIterator<Uint8Array> {
      // Locked as iterating it locks it: a second reader fails as it would. Once the bytes
      // end, the body is cancelled through that reader (nothing is left to read), so the
      // Response reads as used, as after any iteration.
      const reader = ReadableStream.prototype.getReader.call(body) as ReadableStreamDefaultReader;
      bytes.over = () => {
        reader.cancel().then(() => reader.releaseLock(), noop);
      };
      return bytes;
    },
  });
  return body;
}

const noop = () => {};

/** The bytes of each event, in order; a failure ends them as `ends` says. */
class EventBytes implements AsyncIterableIterator<Uint8Array> {
  readonly #events: AsyncIterator<SseChunk> & { return(): Promise<unknown> };
  readonly #ends: Ends;
  #first: IteratorResult<SseChunk> | undefined;
  /** Nothing follows: the end came, a failure's last bytes were handed on, or the
   * consumer left. */
  #over = false;
  /** The failure the bytes ended with, when it left nothing to read. */
  #failed: { error: unknown } | undefined;
  /** The consumer left: every read after it is the end. */
  #returned = false;
  /** The text so far, when the end is recorded. */
  #text = "";
  readonly #decoder: TextDecoder | undefined;

  constructor(
    events: AsyncIterator<SseChunk> & { return(): Promise<unknown> },
    first: IteratorResult<SseChunk>,
    ends: Ends,
  ) {
    this.#events = events;
    this.#first = first;
    this.#ends = ends;
    this.#decoder = ends.done && new TextDecoder();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Told once, when the bytes are over (an end, a failure, the consumer gone). */
  over: () => void = noop;

  next(): Promise<IteratorResult<Uint8Array>> {
    if (this.#returned) return Promise.resolve(DONE);
    if (this.#failed !== undefined) return Promise.reject(this.#failed.error);
    if (this.#over) return Promise.resolve(DONE);
    // A read over one not yet settled waits for it: the reads below hold one at a time,
    // and what the first ends with (a failure, the end) decides what the next one gets.
    if (this.#busy) {
      const after = () => this.next();
      return this.#pending!.then(after, after);
    }
    const first = this.#first;
    if (first !== undefined) {
      this.#first = undefined;
      return this.#settling(this.#onEvent(first));
    }
    if (!pullable(this.#events)) return this.#events.next().then(this.#onEvent, this.#onError);
    // The one promise of this read: the layers below call back (see PULL).
    this.#busy = true;
    this.#pending = new Promise(this.#pull);
    return this.#pending;
  }

  /** A read is under way: from its PULL until what it resolved with settled. */
  #busy = false;
  #resolve:
    | ((r: IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>>) => void)
    | undefined;
  #pending: Promise<IteratorResult<Uint8Array>> | undefined;

  readonly #pull = (
    resolve: (r: IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>>) => void,
  ): void => {
    this.#resolve = resolve;
    try {
      (this.#events as Pullable<SseChunk>)[PULL](this.#onPulled, this.#onPullFailed);
    } catch (error) {
      this.#onPullFailed(error);
    }
  };

  readonly #onPulled = (r: IteratorResult<SseChunk>): void => {
    let out: IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>>;
    try {
      out = this.#onEvent(r);
    } catch (error) {
      out = Promise.reject(error);
    }
    this.#handOn(out);
  };

  readonly #onPullFailed = (error: unknown): void => this.#handOn(this.#onError(error));

  /** Settles the read under way with `out`: a chunk at once, an end or a failure (a
   * promise) once it settles, the read still under way until then. */
  #handOn(out: IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>>): void {
    const resolve = this.#resolve!;
    this.#resolve = undefined;
    if (out instanceof Promise) this.#settling(out);
    else this.#busy = false;
    resolve(out);
  }

  /** `out`, with the read under way until it settles. */
  #settling(
    out: IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>>,
  ): Promise<IteratorResult<Uint8Array>> {
    if (!(out instanceof Promise)) return Promise.resolve(out);
    this.#busy = true;
    this.#pending = out;
    const settled = () => {
      this.#busy = false;
    };
    out.then(settled, settled);
    return out;
  }

  readonly #onEvent = (
    r: IteratorResult<SseChunk>,
  ): IteratorResult<Uint8Array> | Promise<IteratorResult<Uint8Array>> => {
    if (r.done) return this.#end();
    const bytes = r.value.bytes ?? ENCODER.encode(r.value.raw);
    if (this.#decoder !== undefined) this.#text += this.#decoder.decode(bytes, STREAMING);
    if (this.#ends.last?.(bytes) === true) return this.#held(bytes);
    return { done: false, value: bytes };
  };

  /** The SDK's end mark, handed on once the stream behind it ended: its end checks passed
   * (a failure is handed on instead) and its end was recorded. */
  async #held(bytes: Uint8Array): Promise<IteratorResult<Uint8Array>> {
    let r: IteratorResult<SseChunk>;
    try {
      r = await this.#events.next();
    } catch (error) {
      return this.#onError(error);
    }
    // More came after the mark: hand both on, the rest as it comes.
    if (!r.done) {
      this.#first = r;
      return { done: false, value: bytes };
    }
    await this.#end();
    return { done: false, value: bytes };
  }

  readonly #onError = async (error: unknown): Promise<IteratorResult<Uint8Array>> => {
    let last: string | undefined;
    try {
      last = await this.#ends.failed(error);
    } catch {} // what `failed` could not make, the error is as it came
    this.#close();
    // Without last bytes the failure is the body's: every read after it fails the same.
    if (last === undefined) {
      if (!this.#returned) this.#failed = { error };
      throw error;
    }
    return { done: false, value: ENCODER.encode(last) };
  };

  async #end(): Promise<IteratorResult<Uint8Array>> {
    // An end that comes after the consumer left is no whole answer: it is not recorded.
    const record = !this.#over && this.#ends.done !== undefined;
    this.#close();
    if (record) await this.#ends.done!(this.#text + this.#decoder!.decode());
    return DONE;
  }

  #close(): void {
    if (this.#over) return;
    this.#over = true;
    this.over();
  }

  async return(): Promise<IteratorResult<Uint8Array>> {
    const open = !this.#over;
    // Leaving counts only while the bytes go on (the body's own cancel, once they are over,
    // comes back here).
    if (open) this.#returned = true;
    this.#close();
    if (open) await this.#events.return();
    return DONE;
  }
}

/** A test of whether a read's bytes end with an event whose data is `mark` (trailing line
 * breaks aside): a few byte compares at its end, whatever its length. */
export function endsWithData(mark: string): (bytes: Uint8Array) => boolean {
  const m = ENCODER.encode(mark);
  return (b) => {
    let i = b.length - 1;
    while (i >= 0 && (b[i] === 10 || b[i] === 13)) i--;
    if (i + 1 < m.length + 5) return false; // "data:" at least before it
    for (let j = m.length - 1; j >= 0; j--, i--) if (b[i] !== m[j]) return false;
    return b[i] === 32 || b[i] === 58; // "data: [DONE]" or "data:[DONE]"
  };
}
