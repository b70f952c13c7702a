import { earliest, type Limit, type TimeoutCause } from "../core/deadline.ts";
import type { Ledger } from "../core/ledger.ts";
import type { Usage } from "../core/usage.ts";
import type { AttemptScope } from "./attempt-scope.ts";
import { Call } from "./call.ts";
import type { ResolvedOptions } from "./options.ts";
import {
  type OpenStream,
  type ResolvedStream,
  resolveStream,
  type StreamOptions,
} from "./stream-options.ts";

export type { DiscardInfo, OpenStream, StreamMode, StreamOptions } from "./stream-options.ts";

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

/** What the slow path must do after a read: pull again, or handle a failure. */
const AGAIN = Symbol("again");
type Pending = typeof AGAIN | { failed: unknown };

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
  readonly #signal: AbortSignal | undefined;
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

  constructor(o: ResolvedOptions, open: OpenStream<C>, options: StreamOptions<C> = {}) {
    this.#s = resolveStream(o, open, options);
    this.#o = o;
    this.#open = open;
    this.#signal = options.signal;
    this.done = new Promise<StreamOutcome>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.done.catch(noop); // the iterator throws too: an unread outcome is not unhandled
    this.#call = new Call(o, options);
    this.#signal?.addEventListener("abort", this.#onCallerAbort, { once: true });
  }

  get ledger(): Ledger {
    return this.#call.ledger;
  }

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
    return step === AGAIN || "failed" in step ? this.#slow(step) : step;
  };

  readonly #onReadError = (error: unknown): Promise<IteratorResult<C>> =>
    this.#slow({ failed: error });

  /** Everything that is not the fast path; finishes the stream on any error it throws. */
  async #slow(pending: Pending | undefined): Promise<IteratorResult<C>> {
    try {
      if (pending !== undefined && pending !== AGAIN) await this.#attemptFailed(pending.failed);
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
        if (step === AGAIN) continue;
        if ("failed" in step) {
          await this.#attemptFailed(step.failed);
          continue;
        }
        return step;
      }
    } catch (error) {
      this.#finish(error);
      throw error;
    }
  }

  /** One read from the source: a chunk for the consumer, or what the slow path must do. */
  #step(r: IteratorResult<C>): IteratorResult<C> | Pending {
    if (r.done) {
      this.#attemptSucceeded();
      return AGAIN;
    }
    const chunk = r.value;
    if (this.#s.inspect !== undefined) {
      const inBand = this.#s.inspect(chunk);
      if (inBand !== undefined) return { failed: inBand };
    }
    if (this.#s.usage !== undefined) this.#noteUsage(chunk);
    if (!this.#contentSeen) {
      if (this.#s.isContent !== undefined && !this.#s.isContent(chunk)) {
        this.#held.push(chunk);
        return AGAIN;
      }
      this.#contentSeen = true;
      if (this.#s.idleMs !== Number.POSITIVE_INFINITY) this.#lastChunkAt = this.#o.clock.now();
      this.#armWatchdog();
    } else if (this.#s.idleMs !== Number.POSITIVE_INFINITY) {
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

  /** The consumer stopped (break out of for-await): close the source, keep no timer. */
  async return(): Promise<IteratorResult<C>> {
    if (!this.#finished) {
      const stoppedEarly = !this.#succeeded;
      if (stoppedEarly && this.#scope) this.#call.succeed(this.#attemptUsage());
      this.#finish(undefined, stoppedEarly);
    }
    return { done: true, value: undefined };
  }

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

  async #startAttempt(): Promise<void> {
    const scope = this.#call.begin();
    this.#scope = scope;
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
    scope.onAbort((reason) => {
      const resolve = this.#pendingRead;
      if (resolve === undefined) return;
      this.#pendingRead = undefined;
      resolve(this.#onReadError(reason));
    });
    this.#attemptStart = this.#o.clock.now();
    this.#armWatchdog();
    let opening: Promise<AsyncIterable<C>>;
    try {
      opening = Promise.resolve(this.#open(scope));
    } catch (error) {
      await this.#attemptFailed(error);
      return;
    }
    try {
      const iterable = await scope.race(opening);
      this.#source = iterable[Symbol.asyncIterator]();
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

  #noteUsage(chunk: C) {
    const u = this.#s.usage!(chunk);
    if (u === undefined) return;
    if (u.inputTokens !== undefined) this.#input = u.inputTokens;
    if (u.outputTokens !== undefined) this.#output = u.outputTokens;
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

  async #attemptFailed(error: unknown): Promise<void> {
    closeIterator(this.#source);
    this.#source = undefined;
    const usage = this.#attemptUsage();
    const delivered = this.#delivered;
    const emitted = delivered.length > 0;
    const partial = emitted ? { chunks: delivered, usage } : undefined;
    this.#resetAttempt();
    if (!emitted) {
      await this.#call.fail(error, { usage });
    } else if (this.#s.mode === "restart") {
      const attempt = this.#call.attempt;
      const onDiscard = this.#s.onDiscard!;
      await this.#call.fail(error, {
        usage,
        partial,
        beforeWait: () => onDiscard({ attempt, chunks: delivered, error }),
      });
    } else {
      await this.#call.fail(error, { usage, partial, retry: false });
    }
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

  readonly #onCallerAbort = () => {
    // Close the source at once, even if the consumer is not pulling.
    closeIterator(this.#source);
  };

  #finish(error: unknown, stopped = false) {
    if (this.#finished) return;
    this.#finished = true;
    this.#scope?.end();
    closeIterator(this.#source);
    this.#source = undefined;
    this.#signal?.removeEventListener("abort", this.#onCallerAbort);
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
  if (stream instanceof GuardedStream) return stream as GuardedStream<C>;
  throw new TypeError(
    "guardedStream: not a stream returned by breakwater (policy.stream or an adapter)",
  );
}
