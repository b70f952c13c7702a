import type { Clock } from "../index.ts";

/** One step of a scripted stream. */
export type StreamStep<C> =
  | { chunk: C; afterMs?: number }
  | { error: unknown; afterMs?: number }
  /** Never sends another chunk (until closed). */
  | { stall: true };

/**
 * A scripted async stream on a clock, the way an SDK stream behaves: `return()` closes it
 * (and a pending read rejects with an AbortError, as when the HTTP request is aborted).
 */
export class FakeStream<C> implements AsyncIterable<C>, AsyncIterator<C> {
  closed = false;
  read = 0;
  readonly #clock: Clock;
  readonly #steps: readonly StreamStep<C>[];
  readonly #closer = new AbortController();

  constructor(clock: Clock, steps: readonly StreamStep<C>[]) {
    this.#clock = clock;
    this.#steps = steps;
  }

  /** The stream is its own iterator. */
  [Symbol.asyncIterator](): this {
    return this;
  }

  /** The next scripted chunk, after its delay on the clock (or the scripted fault). */
  async next(): Promise<IteratorResult<C>> {
    if (this.closed) return { done: true, value: undefined };
    const step = this.#steps[this.read++];
    if (step === undefined) return { done: true, value: undefined };
    if ("stall" in step) {
      await new Promise((_, reject) =>
        this.#closer.signal.addEventListener(
          "abort",
          () => reject(new DOMException("closed", "AbortError")),
          { once: true },
        ),
      );
    }
    const s = step as { afterMs?: number; chunk?: C; error?: unknown };
    if (s.afterMs) await this.#clock.sleep(s.afterMs, this.#closer.signal);
    if ("error" in s) throw s.error;
    return { done: false, value: s.chunk as C };
  }

  /** Closes the stream: a pending read rejects as an abort; `closed` turns true. */
  async return(): Promise<IteratorResult<C>> {
    this.closed = true;
    this.#closer.abort();
    return { done: true, value: undefined };
  }
}
