import { type Unwatch, watchAbort } from "./abort.ts";
import { MinHeap } from "./heap.ts";

/** Cancels a scheduled callback; calling it twice is harmless. */
export type Cancel = () => void;

/** Every wait and timeout in breakwater goes through a Clock (docs/architecture.md, rule 9). */
export interface Clock {
  /** The time, in ms since the epoch (virtual clocks start where they are told). */
  now(): number;
  /** Resolves after `ms`; rejects at once with `signal.reason` when the signal aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Runs `fn` after `ms`. The returned function cancels it. */
  schedule(ms: number, fn: () => void): Cancel;
}

/** Whether `x` is a Clock: the one test, used by every owner that takes one. */
export function isClock(x: unknown): x is Clock {
  const c = x as Partial<Record<keyof Clock, unknown>> | null;
  return (
    c !== null &&
    typeof c === "object" &&
    typeof c.now === "function" &&
    typeof c.sleep === "function" &&
    typeof c.schedule === "function"
  );
}

function sleepWith(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    let unwatch: Unwatch | undefined;
    const cancel = clock.schedule(ms, () => {
      unwatch?.();
      resolve();
    });
    if (signal)
      unwatch = watchAbort(signal, {
        onAbort: (reason) => {
          cancel();
          reject(reason);
        },
      });
  });
}

// Read once: the getter costs ~10 ns on every call, and every policy call reads the clock.
const ORIGIN = performance.timeOrigin;

/**
 * Keeps the process alive while any systemClock timer is pending. One ref'd handle for all
 * of them: a ref'd timer per wait costs ~150 ns more than an unref'd one in Node, and the
 * handle is cleared at most once per turn of the event loop, after the last timer ends.
 */
const holder = {
  pending: 0,
  handle: undefined as ReturnType<typeof setInterval> | undefined,
  checking: false,
  hold(): void {
    if (this.pending++ > 0) return;
    this.handle ??= setInterval(noop, 2 ** 31 - 1);
  },
  release(): void {
    if (--this.pending > 0 || this.checking) return;
    this.checking = true;
    // Ref'd: an unref'd immediate waits for the next other event, which may never come.
    setImmediate(() => {
      this.checking = false;
      if (this.pending > 0 || this.handle === undefined) return;
      clearInterval(this.handle);
      this.handle = undefined;
    });
  },
};
const noop = () => {};

/** Real time; `hold`: whether a pending timer keeps the process alive. */
function realClock(hold: boolean): Clock {
  const clock: Clock = {
    // Wall time with sub-millisecond precision (Date.now() truncates to whole ms, which
    // alone costs up to 1 ms of deadline precision).
    now: () => ORIGIN + performance.now(),
    sleep: (ms, signal) => sleepWith(clock, ms, signal),
    schedule(ms, fn) {
      // setTimeout fires a millisecond or so late. Arm it 1 ms early, then finish on
      // setImmediate turns until the due time: a 40 ms deadline then returns at ~40 ms.
      const due = performance.now() + ms;
      let immediate: ReturnType<typeof setImmediate> | undefined;
      let live = hold;
      const finish = () => {
        if (performance.now() < due) {
          immediate = setImmediate(finish);
          return;
        }
        if (live) holder.release();
        live = false;
        fn();
      };
      const t = setTimeout(finish, Math.max(0, ms - 1));
      t.unref();
      if (hold) holder.hold();
      return () => {
        clearTimeout(t);
        if (immediate !== undefined) clearImmediate(immediate);
        if (live) holder.release();
        live = false;
      };
    },
  };
  return Object.freeze(clock);
}

/**
 * Real time. A wait or timeout that a caller is awaiting keeps the process alive, as any
 * pending timer does: a script whose call meets a 503 waits out the backoff and finishes
 * (docs/architecture.md, rule 12).
 */
export const systemClock: Clock = realClock(true);

/**
 * Real time whose timers never keep the process alive on their own: for a daemon or a
 * CLI that must be free to exit while a retry is pending (the pending call then never
 * settles). Pass it as `clock` where you want that; `systemClock` is the default.
 */
export const backgroundClock: Clock = realClock(false);

interface Timer {
  at: number;
  seq: number;
  fn: (() => void) | undefined;
}

const isLive = (t: Timer) => t.fn !== undefined;

const drain = () => new Promise<void>((resolve) => setImmediate(resolve));

/** What a VirtualClock takes besides its start. */
export interface VirtualClockOptions {
  /**
   * At most this many timers fire in one turn of the event loop, each in a `setImmediate`
   * callback of its own (Node lets every pending promise callback run between two of
   * them, so each timer's consequences still settle before the next fires). Faster for a
   * simulation with millions of timers (the storm: 1024); but a `setImmediate` the code
   * under test schedules then runs after the turn's later timers, not before the next.
   * @default 1 (a turn of the loop after every timer)
   */
  perTurn?: number;
}

/**
 * Virtual time for tests and the storm. `advance(ms)` fires due timers in order of
 * time (then of scheduling), and after each one waits a `setImmediate` turn, which
 * drains every pending promise callback, so code that awaits between timers sees time
 * move the way it would for real (`perTurn` fires several in one turn, each still settled
 * before the next).
 */
export class VirtualClock implements Clock {
  #now: number;
  #seq = 0;
  #live = 0;
  readonly #timers = new MinHeap<Timer>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq));

  readonly #perTurn: number;

  constructor(startMs = 0, options: VirtualClockOptions = {}) {
    if (!Number.isFinite(startMs))
      throw new RangeError(`VirtualClock: startMs must be finite; got ${startMs}`);
    const perTurn = options.perTurn ?? 1;
    if (!Number.isInteger(perTurn) || perTurn < 1 || perTurn > 65_536)
      throw new RangeError(
        `VirtualClock: option "perTurn" must be an integer from 1 to 65536; got ${String(perTurn)}`,
      );
    this.#now = startMs;
    this.#perTurn = perTurn;
  }

  /** The virtual time, in ms. */
  now(): number {
    return this.#now;
  }

  /** Timers scheduled and neither fired nor cancelled. */
  get pending(): number {
    return this.#live;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }

  schedule(ms: number, fn: () => void): Cancel {
    const timer: Timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(timer);
    this.#live++;
    return () => {
      if (timer.fn === undefined) return;
      timer.fn = undefined;
      this.#live--;
      // Deadlines are mostly cancelled long before they come due: left in the heap they
      // outnumber live timers 40 to 1 in the storm and every pop walks past them.
      if (this.#timers.size > 2 * this.#live + 64) this.#timers.retain(isLive);
    };
  }

  /** Moves time forward by `ms`, firing every timer due on the way. */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new RangeError(`VirtualClock.advance: ms must be >= 0; got ${ms}`);
    const target = this.#now + ms;
    await drain();
    await this.#fireAll(target, Number.POSITIVE_INFINITY);
    this.#now = target;
    await drain();
  }

  /** Fires timers until none is left (or `limit` have fired); returns how many fired. */
  async runAll(limit = 1_000_000): Promise<number> {
    await drain();
    return this.#fireAll(Number.POSITIVE_INFINITY, limit);
  }

  /** Fires timers due by `due`, at most `limit`, each settled before the next: a turn of
   * the loop after each, or (`perTurn`) turns of growing size. */
  async #fireAll(due: number, limit: number): Promise<number> {
    let fired = 0;
    if (this.#perTurn === 1) {
      while (fired < limit && this.#fireNext(due)) {
        fired++;
        await drain();
      }
      return fired;
    }
    for (let n = Math.min(8, this.#perTurn); fired < limit; n = Math.min(2 * n, this.#perTurn)) {
      const max = Math.min(n, limit - fired);
      const got = await this.#fireTurn(due, max);
      fired += got;
      if (got < max) break;
    }
    return fired;
  }

  /**
   * Fires up to `max` timers due by `limit`, one per `setImmediate` callback, all queued in
   * one turn of the event loop. Node drains every pending promise callback between two such
   * callbacks, so each timer's consequences settle before the next fires, as with a turn of
   * the loop each; the turn is what cost (half the storm's wall time went to them).
   * Resolves from a callback that fired nothing, after the last timer's callbacks ran.
   */
  #fireTurn(limit: number, max: number): Promise<number> {
    return new Promise((resolve) => {
      let fired = 0;
      let over = false;
      const step = () => {
        if (over) return;
        if (fired < max && this.#fireNext(limit)) fired++;
        else {
          over = true;
          resolve(fired);
        }
      };
      for (let i = 0; i <= max; i++) setImmediate(step);
    });
  }

  /** Fires the earliest live timer due at or before `limit`. */
  #fireNext(limit: number): boolean {
    for (;;) {
      const next = this.#timers.peek();
      if (next === undefined || next.at > limit) return false;
      this.#timers.pop();
      const fn = next.fn;
      if (fn === undefined) continue;
      next.fn = undefined;
      this.#live--;
      if (next.at > this.#now) this.#now = next.at;
      fn();
      return true;
    }
  }
}
