import { earliest, type Limit, type TimeoutCause } from "../core/deadline.ts";
import type { Usage } from "../core/usage.ts";
import { type Attempt, endGrants, type Grant, type Reporter } from "./attempt.ts";
import type { Call } from "./call.ts";
import { reportHookError } from "./hooks.ts";
import {
  closeIterator,
  cutsReads,
  type Head,
  PULL,
  type Pullable,
  pullable,
  readHead,
} from "./stream-head.ts";
import type { OpenStream, ResolvedStream } from "./stream-options.ts";

const noop = () => {};

/** What an attempt holds that must be let go if its stream is collected unread: the
 * source (an open HTTP response) and the attempt's grants (the breaker's probe slot, the
 * rate limiter's permit). Never the stream itself, nor the attempt (whose timers and abort
 * hook lead back to it). */
interface Grip {
  source: AsyncIterator<unknown> | undefined;
  readonly grants: readonly Grant[];
  readonly startedAt: number;
}

const UNOWNED: Reporter = { report: (hook, error) => reportHookError(undefined, hook, error) };

/** A stream its consumer dropped mid-answer, with no timer left to cut it: closing the
 * source and ending the attempt's grants is all that remains (docs/architecture.md,
 * rule 12). What the attempt spent is not known: the rate limiter keeps its permit whole. */
const abandoned = new FinalizationRegistry<Grip>((grip) => {
  closeIterator(grip.source);
  endGrants(grip.grants, { how: "left" }, grip.startedAt, UNOWNED);
});

/** What an attempt's reads hand back to its stream: the one step of a read, a failed read,
 * and a cut that came while nobody was reading. */
export interface StreamReader<C> {
  /** Steps the stream with a read of its source. */
  readonly read: (r: IteratorResult<C>) => IteratorResult<C> | Promise<IteratorResult<C>>;
  /** A read failed, or was cut. */
  readonly failed: (error: unknown) => Promise<IteratorResult<C>>;
  /** The attempt was cut while no read was pending. */
  readonly cutWhileIdle: (s: StreamAttempt<C>, reason: unknown) => void;
}

/** How a read of this attempt's source is made, chosen when its source opens and again when
 * its timer changes (rule 4): nothing can cut it (`plain`), a cut closes the source and so
 * ends the read (`cuts`), or the read races the cut (`raced`). */
type ReadPath = "plain" | "cuts" | "raced";

/** What PULL's read is waiting for: who is told of it. */
interface PendingPull<C> {
  readonly ok: (r: IteratorResult<C>) => void;
  readonly fail: (error: unknown) => void;
}

/**
 * One attempt of a stream (docs/architecture.md, rule 4): its source and what reading it
 * needs: what it read and held back, its usage, its watchdog, its read handlers (made once,
 * here: each attempt gets a new one, so nothing is reset by hand between attempts), and the
 * head a hedge race reads (rule 21).
 */
export class StreamAttempt<C> {
  readonly attempt: Attempt;
  /** Its source and grants, for the cleanup of a stream collected unread. */
  readonly #grip: Grip;
  path: ReadPath = "raced";
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
  /** The usage its chunks reported, each field its latest value. */
  #said: { input?: number; output?: number } | undefined;
  readonly #call: Call;
  readonly #s: ResolvedStream<C>;
  readonly #reader: StreamReader<C>;
  /** A raced read's resolver, while it is pending. */
  #pending: ((r: IteratorResult<C> | Promise<IteratorResult<C>>) => void) | undefined;
  /** A read of a source that cuts reads is pending. */
  #inRead = false;
  /** Why the read pending was cut: it settles as the cut, whatever the source said. */
  #cut: { reason: unknown } | undefined;
  #pull: PendingPull<C> | undefined;

  constructor(attempt: Attempt, call: Call, s: ResolvedStream<C>, reader: StreamReader<C>) {
    this.attempt = attempt;
    this.#grip = { source: undefined, grants: attempt.grants, startedAt: attempt.startedAt };
    this.#call = call;
    this.#s = s;
    this.#reader = reader;
  }

  get source(): AsyncIterator<C> | undefined {
    return this.#grip.source as AsyncIterator<C> | undefined;
  }

  set source(source: AsyncIterator<C> | undefined) {
    this.#grip.source = source;
  }

  /** It became `stream`'s attempt (from its first read on): were `stream` collected unread,
   * its source is closed and its grants ended. */
  hold(stream: object): void {
    abandoned.register(stream, this.#grip, this.#grip);
  }

  /** It ended: its grants are no longer the cleanup's to end. */
  release(): void {
    abandoned.unregister(this.#grip);
  }

  /** Its source opened: how it is read is known now. */
  opened(source: AsyncIterator<C>): void {
    this.source = source;
    this.pulls = pullable(source);
    this.#pickPath();
  }

  #pickPath(): void {
    const a = this.attempt;
    this.path = !a.abortable
      ? "plain"
      : this.source !== undefined && cutsReads(this.source)
        ? "cuts"
        : "raced";
  }

  /** It became the stream's attempt: a cut reaches its pending read, or the stream. */
  listen(): void {
    this.attempt.setAbortHook((reason) => {
      const resolve = this.#pending;
      this.#pending = undefined;
      if (resolve !== undefined) resolve(this.#reader.failed(reason));
      else if (this.#inRead) {
        this.#cut = { reason };
        this.source?.return?.().catch(noop);
      } else this.#reader.cutWhileIdle(this, reason);
    });
  }

  /** One read of the source, by its path; the stream steps it (`StreamReader.read`). */
  read(): Promise<IteratorResult<C>> {
    const source = this.source!;
    if (this.path === "plain") return source.next().then(this.#reader.read, this.#reader.failed);
    if (this.path === "cuts") {
      this.#inRead = true;
      return source.next().then(this.#onCut, this.#onCutError);
    }
    const read = new Promise<IteratorResult<C>>(this.#hold);
    source.next().then(this.#onRaced, this.#onRacedError);
    return read;
  }

  /** One read with no promise of its own (see PULL), where nothing races it: `ok` or
   * `fail` is told of it. Only one is pending at a time; false when one is. */
  pull(ok: (r: IteratorResult<C>) => void, fail: (error: unknown) => void): boolean {
    if (this.path === "raced" || this.#pull !== undefined) return false;
    if (this.path === "cuts") this.#inRead = true;
    this.#pull = { ok, fail };
    const source = this.source!;
    if (this.pulls) (source as Pullable<C>)[PULL](this.#onPulled, this.#onPullFailed);
    else source.next().then(this.#onPulled, this.#onPullFailed);
    return true;
  }

  readonly #onPulled = (read: IteratorResult<C>): void => {
    const p = this.#pull!;
    this.#pull = undefined;
    let out: IteratorResult<C> | Promise<IteratorResult<C>>;
    try {
      out = this.#onCut(read);
    } catch (error) {
      p.fail(error);
      return;
    }
    if (out instanceof Promise) out.then(p.ok, p.fail);
    else p.ok(out);
  };

  readonly #onPullFailed = (error: unknown): void => {
    const p = this.#pull!;
    this.#pull = undefined;
    this.#onCutError(error).then(p.ok, p.fail);
  };

  readonly #hold = (resolve: (r: IteratorResult<C> | Promise<IteratorResult<C>>) => void) => {
    this.#pending = resolve;
  };

  /** A raced read's answer; a late one, from an attempt already cut, is ignored. */
  readonly #onRaced = (r: IteratorResult<C>): void => {
    const resolve = this.#pending;
    if (this.attempt.aborted || resolve === undefined) return;
    this.#pending = undefined;
    resolve(this.#reader.read(r));
  };

  readonly #onRacedError = (e: unknown): void => {
    const resolve = this.#pending;
    if (this.attempt.aborted || resolve === undefined) return;
    this.#pending = undefined;
    resolve(this.#reader.failed(e));
  };

  readonly #onCut = (r: IteratorResult<C>): IteratorResult<C> | Promise<IteratorResult<C>> => {
    this.#inRead = false;
    return this.#cut === undefined ? this.#reader.read(r) : this.#reader.failed(this.#cut.reason);
  };

  readonly #onCutError = (e: unknown): Promise<IteratorResult<C>> => {
    this.#inRead = false;
    return this.#reader.failed(this.#cut === undefined ? e : this.#cut.reason);
  };

  /** Reads its head up to the first content, for a hedge race (rule 21). */
  head(open: OpenStream<C>): Promise<Head<C>> {
    this.arm();
    return readHead(
      this.attempt,
      open,
      (chunk) => this.isContent(chunk),
      (chunk) => this.noteUsage(chunk),
    );
  }

  /** Whether a chunk is content: with no `isContent`, all are. */
  isContent(chunk: C): boolean {
    const is = this.#s.isContent;
    return is === undefined || chunkHook(this.#call, "isContent", is, chunk, true);
  }

  /** Notes a chunk for the timers: false while no content has come (it is held back).
   * Only content resets the idle timer: a stalled answer behind pings, SSE comments or
   * usage-only chunks still times out (docs/architecture.md, rule 4). */
  content(chunk: C): boolean {
    if (!this.contentSeen) {
      if (!this.isContent(chunk)) return false;
      this.#firstContent();
    } else if (this.#s.idleMs !== Number.POSITIVE_INFINITY && this.isContent(chunk)) {
      this.lastChunkAt = this.#call.clock.now();
    }
    return true;
  }

  /** Its first content came: the observer hears it, the timer becomes the idle one. */
  #firstContent(): void {
    this.contentSeen = true;
    this.attempt.firstContent();
    if (this.#s.idleMs !== Number.POSITIVE_INFINITY) this.lastChunkAt = this.#call.clock.now();
    this.arm();
  }

  /** One timer per attempt: the nearest of deadline, total cap, and first-token (before
   * content) or idle (after). The idle timer re-checks when it fires instead of being
   * re-armed on every chunk: a chunk costs one clock read, not a timer. */
  arm(): void {
    const clock = this.#call.clock;
    const now = clock.now();
    const next = this.#nextLimit();
    if (next.by === "idle") {
      const idleMs = this.#s.idleMs;
      this.attempt.arm(next.at - now, "idle", () => this.lastChunkAt + idleMs - clock.now());
    } else {
      const ms = next.at === Number.POSITIVE_INFINITY ? next.at : Math.max(0, next.at - now);
      this.attempt.arm(ms, next.by);
    }
    this.#pickPath();
  }

  /** The nearest of the call's deadline, the total cap, and first-token (before content)
   * or idle (after); the deadline wins a tie. */
  #nextLimit(): Limit {
    const start = this.attempt.startedAt;
    const call = this.#call;
    const total: Limit = { at: start + this.#s.totalMs, by: "total" };
    if (this.contentSeen) {
      const idle: Limit = { at: this.lastChunkAt + this.#s.idleMs, by: "idle" };
      return earliest<TimeoutCause>(call.deadline, total, idle);
    }
    return earliest<TimeoutCause>(
      call.deadline,
      total,
      { at: start + call.attemptTimeoutMs, by: "attempt" },
      { at: start + this.#s.firstTokenMs, by: "first-token" },
    );
  }

  /** The caller's `usage` reader: one that throws reads as no usage, reported. */
  noteUsage(chunk: C): void {
    const read = this.#s.usage;
    if (read === undefined) return;
    const u = chunkHook(this.#call, "usage", read, chunk, undefined);
    if (u === undefined || u === null) return;
    const input = u.inputTokens;
    const output = u.outputTokens;
    if (typeof input !== "number" && typeof output !== "number") return;
    const said = (this.#said ??= {});
    if (typeof input === "number") said.input = input;
    if (typeof output === "number") said.output = output;
  }

  get usage(): Usage | undefined {
    const said = this.#said;
    if (said === undefined) return undefined;
    return { inputTokens: said.input ?? 0, outputTokens: said.output ?? 0 };
  }

  /** Its held chunks go to the consumer. */
  flushHeld(): void {
    this.out = this.held;
    this.outAt = 0;
    this.held = [];
  }
}

/** Runs one of the caller's per-chunk hooks: one that throws reads as `fallback`, reported. */
export function chunkHook<C, R>(
  call: Call,
  name: string,
  fn: (chunk: C) => R,
  chunk: C,
  fallback: R,
): R {
  try {
    return fn(chunk);
  } catch (error) {
    reportHookError(call, name, error);
    return fallback;
  }
}
