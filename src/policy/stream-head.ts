import type { Attempt } from "./attempt.ts";
import type { OpenStream } from "./stream-options.ts";

/** An attempt's stream up to its first content: what it read, and the rest to come. */
export interface Head<C> {
  readonly attempt: Attempt;
  /** The chunks read, the first content chunk last (unless the stream ended first). */
  readonly chunks: C[];
  /** The rest of the stream: the chunks read first, then the source (rule 21). */
  readonly source: AsyncIterator<C>;
}

const noop = () => {};

/** Said by a source whose `return()` settles a `next()` still pending at once (a stream
 * reader's cancel does): the attempt's timers and the caller's signal cut a read of it by
 * closing it, with no race made for every read. */
export const CUTS_READS: unique symbol = Symbol.for("breakwater.cutsReads");

/** Whether `source` says its `return()` ends a pending read at once. */
export function cutsReads(source: AsyncIterator<unknown>): boolean {
  return (source as { [CUTS_READS]?: unknown })[CUTS_READS] === true;
}

/** Read by an iterator that can be read with no promise of its own: `[PULL](ok, fail)`
 * reads once and calls back (now or later), `ok` with what `next()` would have given or
 * `fail` with what it would have rejected with, once. Layers that read each other this way
 * (a body's bytes, their events, the policy's stream) cost one promise a read, the
 * outermost reader's, instead of one a layer: a promise settled is a turn of the queue. */
export const PULL: unique symbol = Symbol.for("breakwater.pull");

/** One read, called back. */
export type Pull<T> = (ok: (r: IteratorResult<T>) => void, fail: (error: unknown) => void) => void;

/** An iterator that can be read by `PULL`. */
export interface Pullable<T> extends AsyncIterator<T> {
  [PULL]: Pull<T>;
}

/** Whether `it` can be read by `PULL`. */
export function pullable<T>(it: AsyncIterator<T>): it is Pullable<T> {
  return typeof (it as { [PULL]?: unknown })[PULL] === "function";
}

/**
 * Opens `a`'s stream and reads it until its first content chunk (or its end): a hedge race
 * is decided on it (rule 21). Nothing is shown to the consumer here, and no per-chunk hook
 * but `isContent` and `note` runs; the winner's chunks are read again through the stream's
 * own path. A head that fails, or is cut, closes its source.
 */
export async function readHead<C>(
  a: Attempt,
  open: OpenStream<C>,
  isContent: (chunk: C) => boolean,
  note: (chunk: C) => void,
): Promise<Head<C>> {
  const opening = Promise.resolve(a.run(open));
  let it: AsyncIterator<C> | undefined;
  try {
    it = iteratorOf(await a.race(opening));
    const chunks: C[] = [];
    for (;;) {
      const r = await a.race(it.next());
      if (r.done) return { attempt: a, chunks, source: replaying(chunks, undefined) };
      chunks.push(r.value);
      note(r.value);
      if (isContent(r.value)) return { attempt: a, chunks, source: replaying(chunks, it) };
    }
  } catch (error) {
    if (it === undefined) closeLate(opening);
    else closeIterator(it);
    throw error;
  }
}

/** Closes a stream's source. Closing an SDK stream aborts its HTTP request. Never wait on
 * it: a hung source must not hold the consumer. */
export function closeIterator(it: AsyncIterator<unknown> | undefined): void {
  if (it?.return)
    Promise.resolve()
      .then(() => it.return?.())
      .catch(noop);
}

/** Closes the source an opening given up on yields, if it ever does. */
export function closeLate(opening: Promise<AsyncIterable<unknown>>): void {
  opening.then((late) => closeIterator(late?.[Symbol.asyncIterator]?.()), noop);
}

/** `chunks`, then what `rest` yields (nothing, for a stream that ended). */
function replaying<C>(chunks: readonly C[], rest: AsyncIterator<C> | undefined): AsyncIterator<C> {
  let i = 0;
  return {
    next: () =>
      i < chunks.length
        ? Promise.resolve({ done: false, value: chunks[i++]! })
        : rest === undefined
          ? Promise.resolve({ done: true, value: undefined })
          : rest.next(),
    return: (value?: unknown) =>
      rest?.return === undefined
        ? Promise.resolve({ done: true, value: undefined })
        : rest.return(value),
  };
}

/** The iterator of what an attempt opened: a stream, or a TypeError that says what it got
 * (a call that is not a stream belongs to `policy.execute`). */
export function iteratorOf<C>(opened: AsyncIterable<C>): AsyncIterator<C> {
  const of = (opened as Partial<AsyncIterable<C>> | null)?.[Symbol.asyncIterator];
  if (typeof of === "function") return of.call(opened);
  const got = opened === null ? "null" : typeof opened;
  throw new TypeError(
    `policy.stream: the attempt must return an async iterable (a stream), got ${got}; for a call that is not a stream, use policy.execute`,
  );
}
