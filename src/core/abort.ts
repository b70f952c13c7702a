/** Told once when the signal it watches aborts. */
export interface AbortWatcher {
  onAbort(reason: unknown): void;
}

/** Stops watching; calling it twice is harmless. */
export type Unwatch = () => void;

type Entry = AbortWatcher | WeakRef<AbortWatcher>;

const deref = (e: Entry): AbortWatcher | undefined => (e instanceof WeakRef ? e.deref() : e);

/**
 * Every watcher of one signal behind one real listener. A long-lived signal shared by many
 * concurrent calls then carries one listener, not one per attempt (no
 * MaxListenersExceededWarning), and adding or removing a watcher is a Set operation, not an
 * EventTarget one. The listener goes when the last watcher does (docs/architecture.md,
 * rule 12).
 */
class Fanout {
  readonly #signal: AbortSignal;
  /** The only watcher, while there is one (the common case: one call per signal). */
  #one: Entry | undefined;
  #many: Set<Entry> | undefined;
  #sweepAt = 64;

  constructor(signal: AbortSignal) {
    this.#signal = signal;
    // The fanout is the listener (handleEvent): no closure per signal.
    signal.addEventListener("abort", this, { once: true });
  }

  add(entry: Entry): void {
    if (this.#many === undefined && this.#one === undefined) {
      this.#one = entry;
      return;
    }
    if (this.#many === undefined) {
      this.#many = new Set([this.#one!]);
      this.#one = undefined;
    }
    this.#many.add(entry);
    if (this.#many.size >= this.#sweepAt) this.#sweep(this.#many);
  }

  get empty(): boolean {
    return this.#one === undefined && (this.#many?.size ?? 0) === 0;
  }

  delete(entry: Entry): void {
    if (this.#one === entry) this.#one = undefined;
    else if (!this.#many?.delete(entry)) return;
    if (this.empty) emptied(this);
  }

  /** Takes the listener off the signal, if nobody came back since it emptied. */
  detach(): void {
    if (!this.empty || (this.#signal as Carrier)[FANOUT] !== this) return;
    this.#signal.removeEventListener("abort", this);
    setFanout(this.#signal, undefined);
  }

  /** Drops watchers the garbage collector took (an abandoned stream). */
  #sweep(many: Set<Entry>): void {
    for (const e of many) if (deref(e) === undefined) many.delete(e);
    this.#sweepAt = Math.max(64, many.size * 2);
  }

  handleEvent(): void {
    setFanout(this.#signal, undefined);
    const entries = this.#one === undefined ? [...(this.#many ?? [])] : [this.#one];
    this.#one = undefined;
    this.#many = undefined;
    for (const e of entries) {
      try {
        deref(e)?.onAbort(this.#signal.reason);
      } catch {
        // one watcher's failure must not keep the others from hearing the abort
      }
    }
  }
}

/** The fanout rides on the signal itself: a symbol-keyed field is cheaper to find than a
 * WeakMap entry, and goes with the signal. */
const FANOUT = Symbol("breakwater.fanout");
type Carrier = AbortSignal & { [FANOUT]?: Fanout | undefined };
const setFanout = (signal: AbortSignal, f: Fanout | undefined) => {
  (signal as Carrier)[FANOUT] = f;
};

/**
 * The fanout that emptied last, its listener kept until the event loop's turn ends: a loop
 * of calls on one long-lived signal then keeps one listener instead of adding and removing
 * it per call, and none is left once they are done. Only one is kept: the one before is
 * let go when another empties, so a loop of calls each with a signal of its own (what an
 * SDK makes per request) holds one, not one per call, however long no turn ends (a loop
 * of awaited calls that never waits on I/O).
 */
let parked: Fanout | undefined;
function emptied(f: Fanout): void {
  if (parked === f) return;
  const before = parked;
  parked = f;
  if (before === undefined) setImmediate(detachParked);
  else before.detach();
}
function detachParked(): void {
  const f = parked;
  parked = undefined;
  f?.detach();
}

/** Removes a collected watcher's entry without waiting for the next sweep. */
const collected = new FinalizationRegistry<{ fanout: Fanout; ref: WeakRef<AbortWatcher> }>(
  ({ fanout, ref }) => fanout.delete(ref),
);

/**
 * Calls `watcher.onAbort(reason)` once when `signal` aborts (at once if it already has).
 * `weak`: the watcher is not kept alive by the signal, so an abandoned stream can be
 * collected while the caller's long-lived signal lives on.
 */
export function watchAbort(signal: AbortSignal, watcher: AbortWatcher, weak = false): Unwatch {
  if (signal.aborted) {
    watcher.onAbort(signal.reason);
    return noop;
  }
  let fanout = (signal as Carrier)[FANOUT];
  if (fanout === undefined) {
    fanout = new Fanout(signal);
    setFanout(signal, fanout);
  }
  const f = fanout;
  if (!weak) {
    f.add(watcher);
    return () => f.delete(watcher);
  }
  const ref = new WeakRef(watcher);
  f.add(ref);
  collected.register(watcher, { fanout: f, ref }, ref);
  return () => {
    collected.unregister(ref);
    f.delete(ref);
  };
}

const noop = () => {};
