import type { Cancel } from "../core/clock.ts";
import type { Attempt } from "./attempt.ts";
import type { Call } from "./call.ts";

/**
 * An attempt of `call` raced against at most one hedge (docs/architecture.md, rule 21):
 * once `first` has shown nothing for `delayMs`, the call sends a hedge if it may
 * (`call.hedge()`); the first attempt whose answer begins (`answering`, or settling with
 * a value) wins, and the other is cut at once and booked as lost. An attempt that fails
 * while the other is still in flight is booked, and the race goes on with the other; the
 * last failure is what the call decides on. Settles as the winning attempt does.
 */
export function hedged<T>(
  call: Call,
  first: Attempt,
  firstDone: Promise<T>,
  start: (a: Attempt) => Promise<T>,
  delayMs: number,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    new Race(call, first, start, resolve, reject).follow(first, firstDone).arm(delayMs);
  });
}

class Race<T> {
  readonly #call: Call;
  readonly #first: Attempt;
  readonly #start: (a: Attempt) => Promise<T>;
  readonly #resolve: (value: T) => void;
  readonly #reject: (error: unknown) => void;
  #second: Attempt | undefined;
  #winner: Attempt | undefined;
  #inFlight = 1;
  #cancel: Cancel | undefined;

  constructor(
    call: Call,
    first: Attempt,
    start: (a: Attempt) => Promise<T>,
    resolve: (value: T) => void,
    reject: (error: unknown) => void,
  ) {
    this.#call = call;
    this.#first = first;
    this.#start = start;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  /** The hedge's timer, from the first attempt's start (none when no delay is known). */
  arm(delayMs: number): void {
    if (delayMs === Number.POSITIVE_INFINITY || this.#winner !== undefined) return;
    const clock = this.#call.clock;
    const wait = Math.max(0, this.#first.startedAt + delayMs - clock.now());
    this.#cancel = clock.schedule(wait, () => this.#fire());
  }

  #disarm(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #fire(): void {
    this.#cancel = undefined;
    if (this.#winner !== undefined || this.#first.ended) return;
    const h = this.#call.hedge();
    if (h === undefined) return;
    this.#second = h;
    this.#inFlight++;
    this.follow(h, this.#start(h));
  }

  /** `a`'s answer began first: it wins, the other is cut. */
  #decide(a: Attempt): void {
    if (this.#winner !== undefined) return;
    this.#winner = a;
    this.#disarm();
    const other = this.#other(a);
    this.#call.won(a, other !== undefined);
    if (other === undefined || other.ended) return;
    this.#inFlight--;
    this.#call.lost(other);
  }

  #other(a: Attempt): Attempt | undefined {
    return a === this.#first ? this.#second : this.#first;
  }

  follow(a: Attempt, done: Promise<T>): this {
    a.onAnswering(() => this.#decide(a));
    done.then(
      (value) => {
        this.#decide(a);
        if (this.#winner === a) this.#resolve(value);
      },
      (error: unknown) => this.#failed(a, error),
    );
    return this;
  }

  #failed(a: Attempt, error: unknown): void {
    if (a.raced === "lost") return; // cut by the race: booked already
    if (this.#winner === a || this.#inFlight === 1) {
      this.#disarm();
      if (this.#winner === undefined) this.#call.goOn(a);
      this.#reject(error);
      return;
    }
    // The other attempt is still in flight: this one is booked, the race goes on.
    this.#inFlight--;
    this.#call.settle(error, {}, a);
    this.#call.goOn(this.#other(a)!);
  }
}
