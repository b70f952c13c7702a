import { earliest, type Limit, type TimeoutCause } from "../core/deadline.ts";
import type { PartialAnswer, PartialResult } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import type { Ledger } from "../core/ledger.ts";
import type { Permit } from "../core/limiter.ts";
import { checkOutput } from "../core/output.ts";
import { isA } from "../core/safe.ts";
import type { Usage } from "../core/usage.ts";
import type { AttemptScope } from "./attempt-scope.ts";
import { Call, type FailOptions } from "./call.ts";
import { reportHookError, runHook } from "./hooks.ts";
import type { BreakerLease } from "./lease.ts";
import type { ResolvedOptions } from "./options.ts";
import {
  type OpenStream,
  type ResolvedStream,
  resolveStream,
  type StreamOptions,
} from "./stream-options.ts";

export type { DiscardInfo, OpenStream, StreamMode, StreamOptions } from "./stream-options.ts";

/** How a stream ended: its ledger and usage. */
export interface StreamOutcome {
  readonly ledger: Ledger;
  /** The successful attempt's usage (as reported by the chunks). */
  readonly usage: Usage;
  /** Chunks the consumer received from the attempt that counted. */
  readonly chunks: number;
  /** True when the consumer stopped early (break, return). */
  readonly stopped: boolean;
}

const noop = () => {};

/** What an attempt holds that must be let go if its stream is collected unread: the
 * source (an open HTTP response), the breaker's grant and the rate limiter's permit.
 * Never the stream itself. */
interface Grip {
  source: AsyncIterator<unknown> | undefined;
  lease: BreakerLease | undefined;
  permit: Permit | undefined;
}

/** A stream its consumer dropped mid-answer, with no timer left to cut it: closing the
 * source and freeing the breaker is all that remains (docs/architecture.md, rule 12). */
const abandoned = new FinalizationRegistry<Grip>((grip) => {
  closeIterator(grip.source);
  const error = grip.lease?.release("onNeutral");
  if (error !== undefined) reportHookError(undefined, "breaker.onNeutral", error);
  try {
    grip.permit?.settle(); // kept whole: what the attempt spent is not known
  } catch (e) {
    reportHookError(undefined, "limiter.settle", e);
  }
});

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

function closeIterator(it: AsyncIterator<unknown> | undefined): void {
  // Closing an SDK stream aborts its HTTP request. Never wait on it: a hung source must
  // not hold the consumer.
  if (it?.return)
    Promise.resolve()
      .then(() => it.return?.())
      .catch(noop);
}

/**
 * The provider's chunks under the policy (docs/architecture.md, rule 4): a failure before the first
 * content chunk reaches the consumer is retried; after it, nothing is replayed and the
 * iterator throws a `stream-interrupted` BreakwaterError carrying the partial result.
 */
export class GuardedStream<C> implements AsyncIterableIterator<C> {
  /** Resolves with the outcome, or rejects with the error the iterator threw. */
  readonly done: Promise<StreamOutcome>;
  readonly #call: Call;
  readonly #o: ResolvedOptions;
  readonly #open: OpenStream<C>;
  readonly #s: ResolvedStream<C>;
  readonly #grip: Grip = { source: undefined, lease: undefined, permit: undefined };
  /** Aborted when the consumer leaves: ends a wait for the rate limiter at once. */
  #leaving: AbortController | undefined;
  #resolve!: (o: StreamOutcome) => void;
  #reject!: (e: unknown) => void;

  #source: AsyncIterator<C> | undefined;
  #scope: AttemptScope | undefined;
  #attemptStart = 0;
  #lastChunkAt = 0;
  #contentSeen = false;
  #held: C[] = [];
  #out: C[] = [];
  #outAt = 0;
  #delivered: C[] = [];
  #input: number | undefined;
  #output: number | undefined;
  #succeeded = false;
  #finished = false;
  /** The slow path is driving the stream (opening, reading, deciding). */
  #driving = false;
  /** A failure settled while nobody was reading, for the next read to act on. */
  #settled: Settled | undefined;

  constructor(o: ResolvedOptions, open: OpenStream<C>, options: StreamOptions<C> = {}) {
    this.#s = resolveStream(o, open, options);
    this.#o = o;
    this.#open = open;
    this.done = new Promise<StreamOutcome>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.done.catch(noop); // the iterator throws too: an unread outcome is not unhandled
    // Nothing is registered until the first read: a stream never read holds nothing.
    this.#call = new Call(o, options, true);
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
   * and one synchronous step. Anything else (opening, failures, retries, flushing held
   * chunks) goes through the async slow path.
   */
  next(): Promise<IteratorResult<C>> {
    const source = this.#source;
    const scope = this.#scope;
    if (
      source === undefined ||
      scope === undefined ||
      this.#outAt < this.#out.length ||
      this.#finished
    ) {
      return this.#slow(undefined);
    }
    if (!scope.abortable) return source.next().then(this.#onRead, this.#onReadError);
    if (scope.aborted) return this.#slow(undefined);
    // A timer or the caller's signal may cut this read. The handlers are made once per
    // attempt (see #startAttempt) and ignore a late answer from an attempt already cut.
    const read = new Promise<IteratorResult<C>>(this.#holdRead);
    source.next().then(this.#onRaced, this.#onRacedError);
    return read;
  }

  #pendingRead: ((r: IteratorResult<C> | Promise<IteratorResult<C>>) => void) | undefined;
  readonly #holdRead = (resolve: (r: IteratorResult<C> | Promise<IteratorResult<C>>) => void) => {
    this.#pendingRead = resolve;
  };
  #onRaced: (r: IteratorResult<C>) => void = noop;
  #onRacedError: (e: unknown) => void = noop;

  readonly #onRead = (r: IteratorResult<C>): IteratorResult<C> | Promise<IteratorResult<C>> => {
    let step: IteratorResult<C> | Pending;
    try {
      step = this.#step(r);
    } catch (error) {
      this.#finish(error);
      throw error;
    }
    return step === AGAIN || step === ENDED || "failed" in step ? this.#slow(step) : step;
  };

  readonly #onReadError = (error: unknown): Promise<IteratorResult<C>> =>
    this.#slow({ failed: error });

  /** Everything that is not the fast path; finishes the stream on any error it throws. */
  async #slow(pending: Pending | undefined): Promise<IteratorResult<C>> {
    this.#driving = true;
    try {
      if (pending !== undefined) await this.#act(pending);
      const settled = this.#settled;
      this.#settled = undefined;
      if (settled) await this.#call.after(settled.f, settled.error, settled.more);
      for (;;) {
        if (this.#finished) return { done: true, value: undefined };
        if (this.#outAt < this.#out.length)
          return { done: false, value: this.#deliver(this.#out[this.#outAt++]!) };
        if (this.#succeeded) {
          this.#finish(undefined, false);
          return { done: true, value: undefined };
        }
        const source = this.#source;
        if (source === undefined) {
          await this.#startAttempt();
          continue;
        }
        let step: IteratorResult<C> | Pending;
        try {
          step = this.#step(await this.#scope!.race(source.next()));
        } catch (error) {
          step = { failed: error };
        }
        if (step === AGAIN || step === ENDED || "failed" in step) await this.#act(step);
        else return step;
      }
    } catch (error) {
      this.#finish(error);
      throw error;
    } finally {
      this.#driving = false;
    }
  }

  /** What a step left for the slow path to do: check an ended answer, or book a failure. */
  async #act(pending: Pending): Promise<void> {
    if (pending === ENDED) await this.#attemptEnded();
    else if (pending !== AGAIN) await this.#attemptFailed(pending.failed);
  }

  /** One read from the source: a chunk for the consumer, or what the slow path must do. */
  #step(r: IteratorResult<C>): IteratorResult<C> | Pending {
    if (r.done) {
      if (this.#s.output !== undefined) return ENDED;
      this.#attemptSucceeded();
      return AGAIN;
    }
    const chunk = r.value;
    if (this.#s.inspect !== undefined) {
      const inBand = this.#inspect(chunk);
      if (inBand !== undefined) return { failed: inBand };
    }
    if (this.#s.usage !== undefined) this.#noteUsage(chunk);
    if (!this.#contentSeen) {
      if (this.#s.isContent !== undefined && !this.#isContent(chunk)) {
        this.#held.push(chunk);
        return AGAIN;
      }
      this.#contentSeen = true;
      this.#call.firstContent();
      if (this.#s.idleMs !== Number.POSITIVE_INFINITY) this.#lastChunkAt = this.#o.clock.now();
      this.#armWatchdog();
    } else if (this.#s.idleMs !== Number.POSITIVE_INFINITY && this.#isContentOnce(chunk)) {
      // Only content resets the idle timer: a stalled answer behind pings, SSE comments or
      // usage-only chunks still times out (docs/architecture.md, rule 4).
      this.#lastChunkAt = this.#o.clock.now();
    }
    if (this.#s.mode === "buffer" || this.#held.length > 0) {
      this.#held.push(chunk);
      if (this.#s.mode !== "buffer") this.#flushHeld();
      return AGAIN;
    }
    this.#delivered.push(chunk);
    return { done: false, value: chunk };
  }

  /** The caller's `inspect`: one that throws reads as a normal chunk, reported. */
  #inspect(chunk: C): unknown {
    try {
      return this.#s.inspect!(chunk);
    } catch (error) {
      reportHookError(this.#call, "inspect", error);
      return undefined;
    }
  }

  /** Whether a chunk after the first content is content too: with no `isContent`, all are. */
  #isContentOnce(chunk: C): boolean {
    return this.#s.isContent === undefined || this.#isContent(chunk);
  }

  /** The caller's `isContent`: one that throws reads as content, reported. */
  #isContent(chunk: C): boolean {
    try {
      return this.#s.isContent!(chunk);
    } catch (error) {
      reportHookError(this.#call, "isContent", error);
      return true;
    }
  }

  /** The consumer stopped (break out of for-await): close the source, keep no timer. An
   * answer stopped after content is the upstream's success; before it, no verdict. */
  async return(): Promise<IteratorResult<C>> {
    if (!this.#finished) {
      const stoppedEarly = !this.#succeeded;
      if (stoppedEarly && this.#scope)
        this.#call.succeed(this.#attemptUsage(), this.#contentSeen ? "onSuccess" : "onNeutral");
      this.#finish(undefined, stoppedEarly);
    }
    return { done: true, value: undefined };
  }

  /** Stops the stream (as `return` does) and rethrows `error`. */
  async throw(error?: unknown): Promise<IteratorResult<C>> {
    await this.return();
    throw error;
  }

  #deliver(chunk: C): C {
    this.#delivered.push(chunk);
    return chunk;
  }

  #flushHeld() {
    this.#out = this.#held;
    this.#outAt = 0;
    this.#held = [];
  }

  /** The read handlers of one attempt: made once per attempt, they ignore a late answer
   * from an attempt already cut; a cut while nobody reads is settled at once. */
  #bindReads(scope: AttemptScope): void {
    this.#onRaced = (r) => {
      const resolve = this.#pendingRead;
      if (scope.aborted || resolve === undefined) return;
      this.#pendingRead = undefined;
      resolve(this.#onRead(r));
    };
    this.#onRacedError = (e) => {
      const resolve = this.#pendingRead;
      if (scope.aborted || resolve === undefined) return;
      this.#pendingRead = undefined;
      resolve(this.#onReadError(e));
    };
    scope.setAbortHook((reason) => {
      const resolve = this.#pendingRead;
      this.#pendingRead = undefined;
      if (resolve !== undefined) resolve(this.#onReadError(reason));
      else if (!this.#driving) this.#cutWhileIdle(reason);
    });
  }

  async #startAttempt(): Promise<void> {
    const gate = this.#call.gate(() => (this.#leaving ??= new AbortController()).signal);
    if (gate !== undefined) {
      await gate;
      // The consumer left during the wait: nothing was sent, the permit goes back.
      if (this.#finished) return this.#call.abandon(false);
    }
    this.#grip.permit = this.#call.permit;
    const scope = this.#call.begin(true);
    this.#scope = scope;
    this.#grip.lease = this.#call.lease;
    if (this.#call.attempt === 1) abandoned.register(this, this.#grip, this.#grip);
    this.#bindReads(scope);
    this.#attemptStart = this.#o.clock.now();
    this.#armWatchdog();
    let opening: Promise<AsyncIterable<C>>;
    try {
      opening = Promise.resolve(this.#call.run(() => this.#open(scope)));
    } catch (error) {
      await this.#attemptFailed(error);
      return;
    }
    try {
      const iterable = await scope.race(opening);
      this.#source = iterable[Symbol.asyncIterator]();
      this.#grip.source = this.#source;
    } catch (error) {
      opening.then((late) => closeIterator(late?.[Symbol.asyncIterator]?.()), noop);
      await this.#attemptFailed(error);
    }
  }

  /** One timer per attempt: the nearest of deadline, total cap, and first-token (before
   * content) or idle (after). The idle timer re-checks when it fires instead of being
   * re-armed on every chunk: a chunk costs one clock read, not a timer. */
  #armWatchdog() {
    const now = this.#o.clock.now();
    const next = this.#nextLimit();
    const scope = this.#scope!;
    if (next.by === "idle") {
      scope.arm(
        next.at - now,
        "idle",
        () => this.#lastChunkAt + this.#s.idleMs - this.#o.clock.now(),
      );
    } else {
      scope.arm(
        next.at === Number.POSITIVE_INFINITY ? next.at : Math.max(0, next.at - now),
        next.by,
      );
    }
  }

  /** The nearest of the call's deadline, the total cap, and first-token (before content)
   * or idle (after); the deadline wins a tie. */
  #nextLimit(): Limit {
    const start = this.#attemptStart;
    const total: Limit = { at: start + this.#s.totalMs, by: "total" };
    if (this.#contentSeen)
      return earliest<TimeoutCause>(this.#call.deadline, total, {
        at: this.#lastChunkAt + this.#s.idleMs,
        by: "idle",
      });
    return earliest<TimeoutCause>(
      this.#call.deadline,
      total,
      { at: start + this.#o.attemptTimeoutMs, by: "attempt" },
      { at: start + this.#s.firstTokenMs, by: "first-token" },
    );
  }

  /** The caller's `usage` reader: one that throws reads as no usage, reported. */
  #noteUsage(chunk: C) {
    let u: Partial<Usage> | undefined;
    try {
      u = this.#s.usage!(chunk);
    } catch (error) {
      reportHookError(this.#call, "usage", error);
      return;
    }
    if (u === undefined || u === null) return;
    if (typeof u.inputTokens === "number") this.#input = u.inputTokens;
    if (typeof u.outputTokens === "number") this.#output = u.outputTokens;
  }

  #attemptUsage(): Usage | undefined {
    if (this.#input === undefined && this.#output === undefined) return undefined;
    return { inputTokens: this.#input ?? 0, outputTokens: this.#output ?? 0 };
  }

  #attemptSucceeded() {
    this.#scope?.end();
    this.#call.succeed(this.#attemptUsage());
    this.#succeeded = true;
    this.#source = undefined;
    if (this.#s.mode === "buffer" || this.#held.length > 0) this.#flushHeld();
  }

  /** The answer is whole: checked (truncated, `validate`) before it counts as one. */
  async #attemptEnded(): Promise<void> {
    const bad = await checkOutput([...this.#delivered, ...this.#held], this.#s.output!);
    if (bad === undefined) this.#attemptSucceeded();
    else await this.#attemptFailed(bad);
  }

  async #attemptFailed(error: unknown): Promise<void> {
    const settled = this.#settleAttempt(error);
    await this.#call.after(settled.f, settled.error, settled.more);
  }

  /** Closes the failed attempt and books it; what follows (retry or give up) is for the
   * reader to do. */
  #settleAttempt(error: unknown): Settled {
    closeIterator(this.#source);
    this.#source = undefined;
    this.#grip.source = undefined;
    const usage = this.#attemptUsage();
    const delivered = this.#delivered;
    const emitted = delivered.length > 0;
    const partial = emitted
      ? partialResult(delivered, usage, this.#s.answer, this.#call)
      : undefined;
    this.#resetAttempt();
    let more: FailOptions = { usage };
    if (emitted && this.#s.mode === "restart") {
      const attempt = this.#call.attempt;
      const onDiscard = this.#s.onDiscard!;
      more = { usage, partial, beforeWait: () => onDiscard({ attempt, chunks: delivered, error }) };
    } else if (emitted) {
      more = { usage, partial, retry: false };
    }
    return { f: this.#call.settle(error, more), error, more };
  }

  /** A timer or the caller cut the attempt while nobody was reading: let go of the
   * source, the timer, the listener and the breaker now, not at the next read. */
  #cutWhileIdle(reason: unknown): void {
    if (this.#finished || this.#source === undefined) return;
    this.#settled = this.#settleAttempt(reason);
  }

  #resetAttempt() {
    this.#scope = undefined;
    this.#contentSeen = false;
    this.#held = [];
    this.#out = [];
    this.#outAt = 0;
    this.#delivered = [];
    this.#input = undefined;
    this.#output = undefined;
  }

  #finish(error: unknown, stopped = false) {
    if (this.#finished) return;
    this.#finished = true;
    this.#leaving?.abort();
    this.#call.abandon(); // what an attempt still open holds; a no-op once it ended
    closeIterator(this.#source);
    this.#source = undefined;
    this.#grip.source = undefined;
    abandoned.unregister(this.#grip);
    if (error !== undefined) {
      this.#reject(error);
      return;
    }
    const ledger = this.#call.ledger;
    this.#resolve({ ledger, usage: ledger.usage, chunks: this.#delivered.length, stopped });
  }
}

/** The GuardedStream behind an adapter's streaming call (typed as the SDK's own stream):
 * `guardedStream(await client.chat.completions.create({ stream: true, ... })).ledger`. */
export function guardedStream<C = unknown>(stream: unknown): GuardedStream<C> {
  if (isA(stream, GuardedStream)) return stream as GuardedStream<C>;
  throw new TypeError(
    "guardedStream: not a stream returned by breakwater (policy.stream or an adapter)",
  );
}

/** The partial result of a broken stream; its `answer` is read from the chunks when first
 * asked for (an adapter's reader that throws gives none, reported). */
function partialResult<C>(
  chunks: readonly C[],
  usage: Usage | undefined,
  answer: ((chunks: readonly C[]) => PartialAnswer) | undefined,
  call: Call,
): PartialResult<C> {
  if (answer === undefined) return { chunks, usage };
  let read: { value: PartialAnswer | undefined } | undefined;
  return {
    chunks,
    usage,
    get answer() {
      read ??= { value: runHook(call, "answer", () => answer(chunks), undefined) };
      return read.value;
    },
  };
}
