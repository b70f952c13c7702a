import { earliest, type Limit, type TimeoutCause } from "../core/deadline.ts";
import type { PartialAnswer, PartialResult } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import type { Ledger } from "../core/ledger.ts";
import { checkOutput } from "../core/output.ts";
import { isA } from "../core/safe.ts";
import type { Usage } from "../core/usage.ts";
import { ConfigError } from "../core/validate.ts";
import { type Attempt, endGrants, type Grant, NO_GRANTS, type Reporter } from "./attempt.ts";
import { Call, type FailOptions } from "./call.ts";
import { hedged } from "./hedged.ts";
import { reportHookError, runHook } from "./hooks.ts";
import type { ResolvedOptions } from "./options.ts";
import {
  closeIterator,
  closeLate,
  cutsReads,
  type Head,
  iteratorOf,
  PULL,
  type Pullable,
  pullable,
  readHead,
} from "./stream-head.ts";
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

/** What the attempt in flight holds that must be let go if its stream is collected unread:
 * the source (an open HTTP response) and the attempt's grants (the breaker's probe slot,
 * the rate limiter's permit). Never the stream itself, nor the attempt (whose timers and
 * abort hook lead back to it). */
interface Grip {
  source: AsyncIterator<unknown> | undefined;
  grants: readonly Grant[];
  startedAt: number;
}

const UNOWNED: Reporter = { report: (hook, error) => reportHookError(undefined, hook, error) };

/** A stream its consumer dropped mid-answer, with no timer left to cut it: closing the
 * source and ending the attempt's grants is all that remains (docs/architecture.md,
 * rule 12). What the attempt spent is not known: the rate limiter keeps its permit whole. */
const abandoned = new FinalizationRegistry<Grip>((grip) => {
  closeIterator(grip.source);
  endGrants(grip.grants, { how: "left" }, grip.startedAt, UNOWNED);
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

/** One attempt's stream: its source and what it read. Each attempt gets a new one, so
 * nothing is reset by hand between attempts. */
class Reading<C> {
  readonly attempt: Attempt;
  source: AsyncIterator<C> | undefined;
  /** The source's `return()` ends a pending read at once (see CUTS_READS). */
  cuts = false;
  /** The source can be read by PULL. */
  pulls = false;
  contentSeen = false;
  lastChunkAt = 0;
  /** Chunks held back: before the first content, or all of them (buffer mode). */
  held: C[] = [];
  /** Held chunks released to the consumer, read from `outAt`. */
  out: C[] = [];
  outAt = 0;
  /** Chunks that reached the consumer from this attempt. */
  delivered: C[] = [];
  input: number | undefined;
  output: number | undefined;

  constructor(attempt: Attempt) {
    this.attempt = attempt;
  }

  get usage(): Usage | undefined {
    if (this.input === undefined && this.output === undefined) return undefined;
    return { inputTokens: this.input ?? 0, outputTokens: this.output ?? 0 };
  }

  flushHeld(): void {
    this.out = this.held;
    this.outAt = 0;
    this.held = [];
  }
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
  readonly #o: ResolvedOptions;
  readonly #s: ResolvedStream<C>;
  readonly #grip: Grip = { source: undefined, grants: NO_GRANTS, startedAt: 0 };
  /** Opens the next attempt's stream: the caller's, or a continuation's. */
  #open: OpenStream<C>;
  /** Aborted when the consumer leaves: ends a wait at a gate at once. */
  #leaving: AbortController | undefined;
  #resolve!: (o: StreamOutcome) => void;
  #reject!: (e: unknown) => void;
  #r: Reading<C> | undefined;
  /** Chunks earlier attempts showed that a continuation goes on from. */
  #shown: C[] = [];
  #succeeded = false;
  #finished = false;
  /** Its grip is registered for the case it is collected unread. */
  #registered = false;
  /** The attempts of a hedge race under way, by their readings. */
  #racing: Map<Attempt, Reading<C>> | undefined;
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
    const r = this.#r;
    const source = r?.source;
    if (source === undefined || r!.outAt < r!.out.length || this.#finished)
      return this.#slow(undefined);
    const a = r!.attempt;
    if (!a.abortable) return source.next().then(this.#onRead, this.#onReadError);
    if (a.aborted) return this.#slow(undefined);
    // A timer or the caller's signal may cut this read: by closing a source that ends its
    // pending read when closed, else by a race. The handlers are made once per attempt
    // (see #bindReads) and ignore a late answer from an attempt already cut.
    if (r!.cuts) {
      this.#inRead = true;
      return source.next().then(this.#onCut, this.#onCutError);
    }
    const read = new Promise<IteratorResult<C>>(this.#holdRead);
    source.next().then(this.#onRaced, this.#onRacedError);
    return read;
  }

  /**
   * @internal `next()` with no promise of its own (see PULL), where no race is needed
   * (nothing can cut the read, or its source ends a read when closed); else `next()`,
   * called back.
   */
  [PULL](ok: (r: IteratorResult<C>) => void, fail: (error: unknown) => void): void {
    const r = this.#r;
    const source = r?.source;
    const a = r?.attempt;
    if (source === undefined || r!.outAt < r!.out.length || this.#finished || a!.aborted) {
      this.#slow(undefined).then(ok, fail);
      return;
    }
    // Raced reads, and a read over another (PULL holds one at a time): by next().
    if ((a!.abortable && !r!.cuts) || this.#pulls !== undefined) {
      this.next().then(ok, fail);
      return;
    }
    if (a!.abortable) this.#inRead = true;
    this.#pulls = { ok, fail, step: this.#onCut, error: this.#onCutError };
    if (r!.pulls) (source as Pullable<C>)[PULL](this.#onPulled, this.#onPullFailed);
    else source.next().then(this.#onPulled, this.#onPullFailed);
  }

  /** The read PULL made: who is told, and the attempt's handlers it was made under. */
  #pulls:
    | {
        ok: (r: IteratorResult<C>) => void;
        fail: (error: unknown) => void;
        step: (r: IteratorResult<C>) => IteratorResult<C> | Promise<IteratorResult<C>>;
        error: (e: unknown) => Promise<IteratorResult<C>>;
      }
    | undefined;

  readonly #onPulled = (read: IteratorResult<C>): void => {
    const p = this.#pulls!;
    this.#pulls = undefined;
    let out: IteratorResult<C> | Promise<IteratorResult<C>>;
    try {
      out = p.step(read);
    } catch (error) {
      p.fail(error);
      return;
    }
    if (out instanceof Promise) out.then(p.ok, p.fail);
    else p.ok(out);
  };

  readonly #onPullFailed = (error: unknown): void => {
    const p = this.#pulls!;
    this.#pulls = undefined;
    p.error(error).then(p.ok, p.fail);
  };

  #pendingRead: ((r: IteratorResult<C> | Promise<IteratorResult<C>>) => void) | undefined;
  readonly #holdRead = (resolve: (r: IteratorResult<C> | Promise<IteratorResult<C>>) => void) => {
    this.#pendingRead = resolve;
  };
  #onRaced: (r: IteratorResult<C>) => void = noop;
  #onRacedError: (e: unknown) => void = noop;
  /** A read of a source that cuts reads is pending. */
  #inRead = false;
  #onCut: (r: IteratorResult<C>) => IteratorResult<C> | Promise<IteratorResult<C>> = (r) =>
    this.#onRead(r);
  #onCutError: (e: unknown) => Promise<IteratorResult<C>> = (e) => this.#onReadError(e);

  readonly #onRead = (r: IteratorResult<C>): IteratorResult<C> | Promise<IteratorResult<C>> => {
    let step: IteratorResult<C> | Pending;
    try {
      step = this.#step(this.#r!, r);
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
  #step(r: Reading<C>, read: IteratorResult<C>): IteratorResult<C> | Pending {
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
      const inBand = this.#hook("inspect", this.#s.inspect, chunk, undefined);
      if (inBand !== undefined) return { failed: inBand };
    }
    if (this.#s.usage !== undefined) this.#noteUsage(r, chunk);
    if (!r.contentSeen) {
      if (
        this.#s.isContent !== undefined &&
        !this.#hook("isContent", this.#s.isContent, chunk, true)
      ) {
        r.held.push(chunk);
        return AGAIN;
      }
      r.contentSeen = true;
      r.attempt.firstContent();
      if (this.#s.idleMs !== Number.POSITIVE_INFINITY) r.lastChunkAt = this.#o.clock.now();
      this.#armWatchdog(r);
    } else if (this.#s.idleMs !== Number.POSITIVE_INFINITY && this.#isContentOnce(chunk)) {
      // Only content resets the idle timer: a stalled answer behind pings, SSE comments or
      // usage-only chunks still times out (docs/architecture.md, rule 4).
      r.lastChunkAt = this.#o.clock.now();
    }
    if (this.#s.mode === "buffer" || r.held.length > 0) {
      r.held.push(chunk);
      if (this.#s.mode !== "buffer") r.flushHeld();
      return AGAIN;
    }
    r.delivered.push(chunk);
    return { done: false, value: chunk };
  }

  /** Runs one of the caller's per-chunk hooks: one that throws reads as `fallback`, reported. */
  #hook<R>(name: string, fn: (chunk: C) => R, chunk: C, fallback: R): R {
    try {
      return fn(chunk);
    } catch (error) {
      reportHookError(this.#call, name, error);
      return fallback;
    }
  }

  /** Whether a chunk after the first content is content too: with no `isContent`, all are. */
  #isContentOnce(chunk: C): boolean {
    return (
      this.#s.isContent === undefined || this.#hook("isContent", this.#s.isContent, chunk, true)
    );
  }

  /** The consumer stopped (break out of for-await): close the source, keep no timer. An
   * answer stopped after content is the upstream's success; before it, no verdict. */
  async return(): Promise<IteratorResult<C>> {
    if (!this.#finished) {
      const stoppedEarly = !this.#succeeded;
      const r = this.#r;
      if (stoppedEarly && r !== undefined && !r.attempt.ended) {
        this.#call.succeed(r.usage, !r.contentSeen);
        this.#released();
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

  #deliver(r: Reading<C>, chunk: C): C {
    r.delivered.push(chunk);
    return chunk;
  }

  /** The read handlers of one attempt: made once per attempt, they ignore a late answer
   * from an attempt already cut; a cut while nobody reads is settled at once. */
  #bindReads(a: Attempt): void {
    this.#onRaced = (r) => {
      const resolve = this.#pendingRead;
      if (a.aborted || resolve === undefined) return;
      this.#pendingRead = undefined;
      resolve(this.#onRead(r));
    };
    this.#onRacedError = (e) => {
      const resolve = this.#pendingRead;
      if (a.aborted || resolve === undefined) return;
      this.#pendingRead = undefined;
      resolve(this.#onReadError(e));
    };
    // A read cut by closing its source settles as the cut, whatever the source said.
    let cut: { reason: unknown } | undefined;
    this.#onCut = (r) => {
      this.#inRead = false;
      return cut === undefined ? this.#onRead(r) : this.#onReadError(cut.reason);
    };
    this.#onCutError = (e) => {
      this.#inRead = false;
      return this.#onReadError(cut === undefined ? e : cut.reason);
    };
    a.setAbortHook((reason) => {
      const resolve = this.#pendingRead;
      this.#pendingRead = undefined;
      if (resolve !== undefined) resolve(this.#onReadError(reason));
      else if (this.#inRead) {
        cut = { reason };
        this.#r?.source?.return?.().catch(noop);
      } else if (!this.#driving) this.#cutWhileIdle(reason);
    });
  }

  async #startAttempt(): Promise<void> {
    const begun = this.#call.begin(() => (this.#leaving ??= new AbortController()).signal);
    const a = begun instanceof Promise ? await begun : begun;
    // The consumer left during a wait at a gate: nothing was sent, the grants go back.
    if (this.#finished) return this.#call.abandon(false);
    const delay = this.#call.hedgeDelay(a);
    if (delay !== undefined) return this.#startHedged(a, delay);
    const r = this.#reading(a);
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
      r.source = iteratorOf(iterable);
      r.cuts = cutsReads(r.source);
      r.pulls = pullable(r.source);
      this.#grip.source = r.source;
    } catch (error) {
      closeLate(opening);
      if (!this.#finished) await this.#attemptFailed(error);
    }
  }

  /** The attempt's reading becomes the stream's: its reads, its timer, its cleanup. */
  #reading(a: Attempt, r = new Reading<C>(a)): Reading<C> {
    this.#r = r;
    const grip = this.#grip;
    grip.grants = a.grants;
    grip.startedAt = a.startedAt;
    if (!this.#registered) abandoned.register(this, grip, grip);
    this.#registered = true;
    this.#bindReads(a);
    this.#armWatchdog(r);
    return r;
  }

  /**
   * An attempt raced by a hedge up to its first content (rule 21): each reads its head
   * (`readHead`) under its own timer; the first to show content wins and its stream goes
   * on as any attempt's, from its first chunk; the other is cut, never shown.
   */
  async #startHedged(first: Attempt, delayMs: number): Promise<void> {
    const readings = new Map<Attempt, Reading<C>>();
    this.#racing = readings;
    first.racing = true;
    const head = (a: Attempt) => {
      const r = new Reading<C>(a);
      readings.set(a, r);
      this.#armWatchdog(r);
      const isContent = (chunk: C) => this.#isContentOnce(chunk);
      const note = (chunk: C) => {
        if (this.#s.usage !== undefined) this.#noteUsage(r, chunk);
      };
      return readHead(a, this.#open, isContent, note);
    };
    const more = {
      usageOf: (a: Attempt) => readings.get(a)?.usage,
      discard: (late: Head<C>) => closeIterator(late.source),
    };
    let won: Head<C>;
    try {
      won = await hedged(this.#call, first, head(first), head, delayMs, more);
    } catch (error) {
      this.#racing = undefined;
      if (this.#finished) return;
      const a = this.#call.current!;
      this.#reading(a, readings.get(a));
      await this.#attemptFailed(error);
      return;
    }
    this.#racing = undefined;
    // The consumer left during the race: what it won goes with it.
    if (this.#finished) return closeIterator(won.source);
    const r = this.#reading(won.attempt, readings.get(won.attempt));
    r.source = won.source;
    this.#grip.source = won.source;
  }

  /** One timer per attempt: the nearest of deadline, total cap, and first-token (before
   * content) or idle (after). The idle timer re-checks when it fires instead of being
   * re-armed on every chunk: a chunk costs one clock read, not a timer. */
  #armWatchdog(r: Reading<C>) {
    const now = this.#o.clock.now();
    const next = this.#nextLimit(r);
    if (next.by === "idle") {
      r.attempt.arm(
        next.at - now,
        "idle",
        () => r.lastChunkAt + this.#s.idleMs - this.#o.clock.now(),
      );
    } else {
      r.attempt.arm(
        next.at === Number.POSITIVE_INFINITY ? next.at : Math.max(0, next.at - now),
        next.by,
      );
    }
  }

  /** The nearest of the call's deadline, the total cap, and first-token (before content)
   * or idle (after); the deadline wins a tie. */
  #nextLimit(r: Reading<C>): Limit {
    const start = r.attempt.startedAt;
    const total: Limit = { at: start + this.#s.totalMs, by: "total" };
    if (r.contentSeen)
      return earliest<TimeoutCause>(this.#call.deadline, total, {
        at: r.lastChunkAt + this.#s.idleMs,
        by: "idle",
      });
    return earliest<TimeoutCause>(
      this.#call.deadline,
      total,
      { at: start + this.#call.attemptTimeoutMs, by: "attempt" },
      { at: start + this.#s.firstTokenMs, by: "first-token" },
    );
  }

  /** The caller's `usage` reader: one that throws reads as no usage, reported. */
  #noteUsage(r: Reading<C>, chunk: C) {
    const u = this.#hook("usage", this.#s.usage!, chunk, undefined);
    if (u === undefined || u === null) return;
    if (typeof u.inputTokens === "number") r.input = u.inputTokens;
    if (typeof u.outputTokens === "number") r.output = u.outputTokens;
  }

  /** The attempt ended: its grants are no longer the cleanup's to end. */
  #released(): void {
    this.#grip.grants = NO_GRANTS;
    this.#grip.source = undefined;
  }

  #attemptSucceeded(r: Reading<C>) {
    this.#call.succeed(r.usage);
    this.#released();
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
    this.#released();
    this.#r = undefined; // chunks it held back go with it
    return { f, error, more };
  }

  /** What a failure means once output was shown: nothing (none was), a give-up with the
   * partial answer (no-replay), a retry after `onDiscard` (restart), or a continuation
   * (a retry that goes on from what was shown). */
  #afterBreak(error: unknown, shown: C[], r: Reading<C>, usage: Usage | undefined): FailOptions {
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
  #cutWhileIdle(reason: unknown): void {
    if (this.#finished || this.#r?.source === undefined) return;
    this.#settled = this.#settleAttempt(reason);
  }

  #finish(error: unknown, stopped = false) {
    if (this.#finished) return;
    this.#finished = true;
    this.#leaving?.abort();
    // A hedge race under way: each of its attempts is cut, and its head closes its source.
    if (this.#racing !== undefined) for (const a of this.#racing.keys()) this.#call.drop(a);
    this.#call.abandon(); // what an attempt still open holds; a no-op once it ended
    this.#released();
    closeIterator(this.#r?.source);
    if (this.#r) this.#r.source = undefined;
    abandoned.unregister(this.#grip);
    if (error !== undefined) {
      this.#reject(error);
      return;
    }
    const ledger = this.#call.ledger;
    const told = this.#s.shown;
    const shown = this.#shown;
    const held = this.#r?.delivered ?? [];
    // Counted as the user counts them (SHOWN), only when asked.
    let count = told === undefined ? shown.length + held.length : undefined;
    this.#resolve({
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
