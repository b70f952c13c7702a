import type { PartialAnswer, PartialResult } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import type { Ledger } from "../core/ledger.ts";
import { checkOutput } from "../core/output.ts";
import { isA } from "../core/safe.ts";
import type { Usage } from "../core/usage.ts";
import { ConfigError } from "../core/validate.ts";
import type { Attempt } from "./attempt.ts";
import { Call, type FailOptions } from "./call.ts";
import { hedged } from "./hedged.ts";
import { runHook } from "./hooks.ts";
import type { ResolvedOptions } from "./options.ts";
import { chunkHook, StreamAttempt, type StreamReader } from "./stream-attempt.ts";
import { closeIterator, closeLate, type Head, iteratorOf, PULL } from "./stream-head.ts";
import {
  type OpenStream,
  type ResolvedStream,
  resolveStream,
  type StreamOptions,
} from "./stream-options.ts";

export type {
  ContinueFrom,
  DiscardInfo,
  OpenStream,
  StreamMode,
  StreamOptions,
} from "./stream-options.ts";

/** How a stream ended: its ledger and usage. */
export interface StreamOutcome {
  readonly ledger: Ledger;
  /** The successful attempt's usage (as reported by the chunks). */
  readonly usage: Usage;
  /** Chunks the consumer received from the attempt that counted (under the fetch layer,
   * the server-sent events). */
  readonly chunks: number;
  /** True when the consumer stopped early (break, return). */
  readonly stopped: boolean;
}

const noop = () => {};

/** What the slow path must do after a read: pull again, or handle a failure. */
const AGAIN = Symbol("again");
/** The attempt's stream ended, and its answer is to be checked before it counts (rule 11). */
const ENDED = Symbol("ended");
type Pending = typeof AGAIN | typeof ENDED | { failed: unknown };

/** A failed attempt, booked, waiting for its verdict. */
interface Settled {
  readonly f: Failure;
  readonly error: unknown;
  readonly more: FailOptions;
}

/**
 * The provider's chunks under the policy (docs/architecture.md, rule 4): a failure before the first
 * content chunk reaches the consumer is retried; after it, nothing is replayed and the
 * iterator throws a `stream-interrupted` BreakwaterError carrying the partial result
 * (unless the caller opted into a continuation, which is a retry of the same call).
 */
export class GuardedStream<C> implements AsyncIterableIterator<C> {
  /** Resolves with the outcome, or rejects with the error the iterator threw. */
  readonly done: Promise<StreamOutcome>;
  readonly #call: Call;
  readonly #s: ResolvedStream<C>;
  /** What its attempts' reads hand back to it (bound once). */
  readonly #reader: StreamReader<C>;
  /** Opens the next attempt's stream: the caller's, or a continuation's. */
  #open: OpenStream<C>;
  /** Aborted when the consumer leaves: ends a wait at a gate at once. */
  #leaving: AbortController | undefined;
  #ends!: { resolve: (o: StreamOutcome) => void; reject: (e: unknown) => void };
  /** The attempt the consumer reads. */
  #r: StreamAttempt<C> | undefined;
  /** Chunks earlier attempts showed that a continuation goes on from. */
  #shown: C[] = [];
  #succeeded = false;
  #finished = false;
  /** The attempts of a hedge race under way, by their attempts. */
  #racing: Map<Attempt, StreamAttempt<C>> | undefined;
  /** The slow path is driving the stream (opening, reading, deciding). */
  #driving = false;
  /** A failure settled while nobody was reading, for the next read to act on. */
  #settled: Settled | undefined;

  constructor(o: ResolvedOptions, open: OpenStream<C>, options: StreamOptions<C> = {}) {
    this.#s = resolveStream(o, open, options);
    this.#open = open;
    this.done = new Promise<StreamOutcome>((resolve, reject) => {
      this.#ends = { resolve, reject };
    });
    this.done.catch(noop); // the iterator throws too: an unread outcome is not unhandled
    // Nothing is registered until the first read: a stream never read holds nothing.
    this.#call = new Call(o, options, true);
    this.#reader = {
      read: (r) => this.#onRead(r),
      failed: (error) => this.#slow({ failed: error }),
      cutWhileIdle: (s, reason) => this.#cutWhileIdle(s, reason),
    };
  }

  get ledger(): Ledger {
    return this.#call.ledger;
  }

  /** The stream is its own iterator (`for await` over it). */
  [Symbol.asyncIterator](): this {
    return this;
  }

  /**
   * The fast path: with an attempt streaming and nothing queued, one read of the source
   * and one synchronous step (by the read path its attempt chose). Anything else (opening,
   * failures, retries, flushing held chunks) goes through the async slow path.
   */
  next(): Promise<IteratorResult<C>> {
    const r = this.#r;
    if (r?.source === undefined || r.outAt < r.out.length || this.#finished || r.attempt.aborted)
      return this.#slow(undefined);
    return r.read();
  }

  /**
   * @internal `next()` with no promise of its own (see PULL), where no race is needed
   * (nothing can cut the read, or its source ends a read when closed); else `next()`,
   * called back.
   */
  [PULL](ok: (r: IteratorResult<C>) => void, fail: (error: unknown) => void): void {
    const r = this.#r;
    if (r?.source === undefined || r.outAt < r.out.length || this.#finished || r.attempt.aborted)
      this.#slow(undefined).then(ok, fail);
    else if (!r.pull(ok, fail)) r.read().then(ok, fail);
  }

  /** A read of the attempt the consumer reads: a chunk for it, or the slow path. */
  #onRead(r: IteratorResult<C>): IteratorResult<C> | Promise<IteratorResult<C>> {
    let step: IteratorResult<C> | Pending;
    try {
      step = this.#step(this.#r!, r);
    } catch (error) {
      this.#finish(error);
      throw error;
    }
    return step === AGAIN || step === ENDED || "failed" in step ? this.#slow(step) : step;
  }

  /** Everything that is not the fast path; finishes the stream on any error it throws. */
  async #slow(pending: Pending | undefined): Promise<IteratorResult<C>> {
    this.#driving = true;
    try {
      if (pending !== undefined) await this.#act(pending);
      const settled = this.#settled;
      this.#settled = undefined;
      if (settled) await this.#call.after(settled.f, settled.error, settled.more);
      for (;;) {
        const got = await this.#pull();
        if (got !== AGAIN) return got;
      }
    } catch (error) {
      this.#finish(error);
      throw error;
    } finally {
      this.#driving = false;
    }
  }

  /** One turn of the slow path: a chunk or the end for the consumer, or AGAIN. */
  async #pull(): Promise<IteratorResult<C> | typeof AGAIN> {
    if (this.#finished) return { done: true, value: undefined };
    const r = this.#r;
    if (r !== undefined && r.outAt < r.out.length)
      return { done: false, value: this.#deliver(r, r.out[r.outAt++]!) };
    if (this.#succeeded) {
      this.#finish(undefined, false);
      return { done: true, value: undefined };
    }
    if (r?.source === undefined) {
      await this.#startAttempt();
      return AGAIN;
    }
    let step: IteratorResult<C> | Pending;
    try {
      step = this.#step(r, await r.attempt.race(r.source.next()));
    } catch (error) {
      step = { failed: error };
    }
    if (step !== AGAIN && step !== ENDED && !("failed" in step)) return step;
    await this.#act(step);
    return AGAIN;
  }

  /** What a step left for the slow path to do: check an ended answer, or book a failure. */
  async #act(pending: Pending): Promise<void> {
    if (this.#finished) return; // the consumer left while the read was pending: nothing to book
    if (pending === ENDED) await this.#attemptEnded();
    else if (pending !== AGAIN) await this.#attemptFailed(pending.failed);
  }

  /** One read from the source: a chunk for the consumer, or what the slow path must do. */
  #step(r: StreamAttempt<C>, read: IteratorResult<C>): IteratorResult<C> | Pending {
    // A read that settles after the consumer left (closing a source that cuts reads ends
    // the read it held): the stream is over, and nothing is booked twice.
    if (this.#finished) return { done: true, value: undefined };
    if (read.done) {
      if (this.#s.output !== undefined) return ENDED;
      this.#attemptSucceeded(r);
      return AGAIN;
    }
    const chunk = read.value;
    if (this.#s.inspect !== undefined) {
      const inBand = chunkHook(this.#call, "inspect", this.#s.inspect, chunk, undefined);
      if (inBand !== undefined) return { failed: inBand };
    }
    r.noteUsage(chunk);
    if (!r.content(chunk)) {
      r.held.push(chunk);
      return AGAIN;
    }
    if (this.#s.mode === "buffer" || r.held.length > 0) {
      r.held.push(chunk);
      if (this.#s.mode !== "buffer") r.flushHeld();
      return AGAIN;
    }
    r.delivered.push(chunk);
    return { done: false, value: chunk };
  }

  /** The consumer stopped (break out of for-await): close the source, keep no timer. An
   * answer stopped after content is the upstream's success; before it, no verdict. */
  async return(): Promise<IteratorResult<C>> {
    if (!this.#finished) {
      const stoppedEarly = !this.#succeeded;
      const r = this.#r;
      if (stoppedEarly && r !== undefined && !r.attempt.ended) {
        this.#call.succeed(r.usage, !r.contentSeen);
        r.release();
      }
      this.#finish(undefined, stoppedEarly);
    }
    return { done: true, value: undefined };
  }

  /** Stops the stream (as `return` does) and rethrows `error`. */
  async throw(error?: unknown): Promise<IteratorResult<C>> {
    await this.return();
    throw error;
  }

  #deliver(r: StreamAttempt<C>, chunk: C): C {
    r.delivered.push(chunk);
    return chunk;
  }

  async #startAttempt(): Promise<void> {
    const begun = this.#call.begin(() => (this.#leaving ??= new AbortController()).signal);
    const a = begun instanceof Promise ? await begun : begun;
    // The consumer left during a wait at a gate: nothing was sent, the grants go back.
    if (this.#finished) return this.#call.abandon(false);
    const delay = this.#call.hedgeDelay(a);
    if (delay !== undefined) return this.#startHedged(a, delay);
    const r = this.#reading(this.#attemptOf(a));
    let opening: Promise<AsyncIterable<C>>;
    try {
      opening = Promise.resolve(a.run(this.#open));
    } catch (error) {
      await this.#attemptFailed(error);
      return;
    }
    try {
      const iterable = await a.race(opening);
      // The consumer left while it opened: what it opened goes with it.
      if (this.#finished) return closeIterator(iteratorOf(iterable));
      this.#opened(r, iteratorOf(iterable));
    } catch (error) {
      closeLate(opening);
      if (!this.#finished) await this.#attemptFailed(error);
    }
  }

  #attemptOf(a: Attempt): StreamAttempt<C> {
    return new StreamAttempt(a, this.#call, this.#s, this.#reader);
  }

  /** The attempt becomes the stream's: its reads, its timer, its cleanup. */
  #reading(r: StreamAttempt<C>): StreamAttempt<C> {
    this.#r = r;
    r.hold(this);
    r.listen();
    r.arm();
    return r;
  }

  #opened(r: StreamAttempt<C>, source: AsyncIterator<C>): void {
    r.opened(source);
  }

  /**
   * An attempt raced by a hedge up to its first content (rule 21): each reads its head
   * under its own timer; the first to show content wins and its stream goes on as any
   * attempt's, from its first chunk; the other is cut, never shown.
   */
  async #startHedged(first: Attempt, delayMs: number): Promise<void> {
    const racing = new Map<Attempt, StreamAttempt<C>>();
    this.#racing = racing;
    first.racing = true;
    const head = (a: Attempt) => {
      const r = this.#attemptOf(a);
      racing.set(a, r);
      return r.head(this.#open);
    };
    const more = {
      usageOf: (a: Attempt) => racing.get(a)?.usage,
      discard: (late: Head<C>) => closeIterator(late.source),
    };
    let won: Head<C>;
    try {
      won = await hedged(this.#call, first, head(first), head, delayMs, more);
    } catch (error) {
      this.#racing = undefined;
      if (this.#finished) return;
      const a = this.#call.current!;
      this.#reading(racing.get(a) ?? this.#attemptOf(a));
      await this.#attemptFailed(error);
      return;
    }
    this.#racing = undefined;
    // The consumer left during the race: what it won goes with it.
    if (this.#finished) return closeIterator(won.source);
    this.#opened(this.#reading(racing.get(won.attempt)!), won.source);
  }

  #attemptSucceeded(r: StreamAttempt<C>) {
    this.#call.succeed(r.usage);
    r.release();
    this.#succeeded = true;
    r.source = undefined;
    if (this.#s.mode === "buffer" || r.held.length > 0) r.flushHeld();
  }

  /** The answer is whole: checked (truncated, `validate`) before it counts (rule 11). */
  async #attemptEnded(): Promise<void> {
    const r = this.#r!;
    const bad = await checkOutput([...this.#shown, ...r.delivered, ...r.held], this.#s.output!);
    if (bad === undefined) this.#attemptSucceeded(r);
    else await this.#attemptFailed(bad);
  }

  async #attemptFailed(error: unknown): Promise<void> {
    const settled = this.#settleAttempt(error);
    await this.#call.after(settled.f, settled.error, settled.more);
  }

  /** Closes the failed attempt and books it; what follows (retry or give up) is for the
   * reader to do. */
  #settleAttempt(error: unknown): Settled {
    const r = this.#r!;
    closeIterator(r.source);
    r.source = undefined;
    const usage = r.usage;
    const shown = r.delivered.length > 0 ? [...this.#shown, ...r.delivered] : this.#shown;
    const more = this.#afterBreak(error, shown, r, usage);
    const f = this.#call.settle(error, more);
    r.release();
    this.#r = undefined; // chunks it held back go with it
    return { f, error, more };
  }

  /** What a failure means once output was shown: nothing (none was), a give-up with the
   * partial answer (no-replay), a retry after `onDiscard` (restart), or a continuation
   * (a retry that goes on from what was shown). */
  #afterBreak(
    error: unknown,
    shown: C[],
    r: StreamAttempt<C>,
    usage: Usage | undefined,
  ): FailOptions {
    if (shown.length === 0) return { usage };
    const s = this.#s;
    const partial = partialResult(shown, usage, s, this.#call);
    if (s.mode === "restart") {
      const info = { attempt: r.attempt.attempt, chunks: r.delivered, error };
      return { usage, partial, beforeWait: () => s.onDiscard!(info) };
    }
    const next =
      s.continueFrom === undefined
        ? undefined
        : runHook(this.#call, "continueFrom", () => s.continueFrom!(partial, error), undefined);
    if (next === undefined) return { usage, partial, retry: false };
    this.#shown = shown;
    this.#open = next;
    return { usage, partial };
  }

  /** A timer or the caller cut the attempt while nobody was reading: let go of the
   * source, the timer, the listener and the grants now, not at the next read. */
  #cutWhileIdle(r: StreamAttempt<C>, reason: unknown): void {
    if (this.#driving || this.#finished || this.#r !== r || r.source === undefined) return;
    this.#settled = this.#settleAttempt(reason);
  }

  #finish(error: unknown, stopped = false) {
    if (this.#finished) return;
    this.#finished = true;
    this.#leaving?.abort();
    // A hedge race under way: each of its attempts is cut, and its head closes its source.
    if (this.#racing !== undefined) for (const a of this.#racing.keys()) this.#call.drop(a);
    this.#call.abandon(); // what an attempt still open holds; a no-op once it ended
    const r = this.#r;
    if (r !== undefined) {
      r.release();
      closeIterator(r.source);
      r.source = undefined;
    }
    if (error !== undefined) {
      this.#ends.reject(error);
      return;
    }
    const ledger = this.#call.ledger;
    const told = this.#s.shown;
    const shown = this.#shown;
    const held = this.#r?.delivered ?? [];
    // Counted as the user counts them (SHOWN), only when asked.
    let count = told === undefined ? shown.length + held.length : undefined;
    this.#ends.resolve({
      ledger,
      usage: ledger.usage,
      get chunks() {
        count ??= told!([...shown, ...held]).length;
        return count;
      },
      stopped,
    });
  }
}

/** The GuardedStream behind each adapter stream, by what the SDK's own stream keeps of
 * its request: its abort signal (openai, anthropic: `stream.controller.signal`). */
const behind = new WeakMap<object, GuardedStream<unknown>>();

/** @internal Records that `key` (a request's signal) belongs to stream `s`. */
export function streamBehind(key: object, s: GuardedStream<unknown>): void {
  behind.set(key, s);
}

/** The GuardedStream behind an adapter's streaming call (typed as the SDK's own stream):
 * `guardedStream(await client.chat.completions.create({ stream: true, ... })).ledger`. */
export function guardedStream<C = unknown>(stream: unknown): GuardedStream<C> {
  if (isA(stream, GuardedStream)) return stream as GuardedStream<C>;
  const signal = (stream as { controller?: { signal?: unknown } } | null)?.controller?.signal;
  const found = signal !== null && typeof signal === "object" ? behind.get(signal) : undefined;
  if (found !== undefined) return found as GuardedStream<C>;
  throw new ConfigError(
    "guardedStream",
    "stream",
    stream,
    "a stream returned by breakwater: policy.stream, or an openai or anthropic client's stream under withBreakwater",
  );
}

/** The partial result of a broken stream; its `answer` is read from the chunks when first
 * asked for (an adapter's reader that throws gives none, reported), and its chunks are told
 * as the source tells them (SHOWN), also when first asked for. */
function partialResult<C>(
  chunks: readonly C[],
  usage: Usage | undefined,
  s: Pick<ResolvedStream<C>, "answer" | "shown">,
  call: Call,
): PartialResult<C> {
  const { answer, shown } = s;
  if (answer === undefined && shown === undefined) return { chunks, usage };
  let read: { value: PartialAnswer | undefined } | undefined;
  let told: readonly C[] | undefined;
  return {
    get chunks() {
      told ??= shown === undefined ? chunks : (shown(chunks) as readonly C[]);
      return told;
    },
    usage,
    get answer() {
      if (answer === undefined) return undefined;
      read ??= { value: runHook(call, "answer", () => answer(chunks), undefined) };
      return read.value;
    },
  };
}
