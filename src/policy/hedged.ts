import type { Cancel } from "../core/clock.ts";
import type { Usage } from "../core/usage.ts";
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
  more: Pick<RaceEnds<T>, "usageOf" | "discard"> = {},
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const race = new Race(call, first, start, { resolve, reject, ...more });
    race.follow(first, firstDone).arm(delayMs);
  });
}

/** What a race tells its call, as it happens (`Call.raced`): `won` began its answer first
 * (`raced` when another attempt was in the race; `first` is the attempt a hedge raced);
 * `lost` was cut by the winner, with what it is known to have spent; or the call goes on
 * with `goOn`, the other attempt having `failed` first (booked). */
export type RaceNews =
  | { readonly won: Attempt; readonly first: Attempt; readonly raced: boolean }
  | { readonly lost: Attempt; readonly usage: Partial<Usage> | undefined }
  | {
      readonly goOn: Attempt;
      readonly failed?: { readonly attempt: Attempt; readonly error: unknown } | undefined;
    };

/** Where a race's outcome goes, what a loser is known to have spent, and what to do with
 * a value that came too late to count (a stream's head: close it). */
export interface RaceEnds<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
  usageOf?: ((a: Attempt) => Partial<Usage> | undefined) | undefined;
  discard?: ((value: T) => void) | undefined;
}

class Race<T> {
  readonly #call: Call;
  readonly #first: Attempt;
  readonly #start: (a: Attempt) => Promise<T>;
  readonly #ends: RaceEnds<T>;
  #second: Attempt | undefined;
  #winner: Attempt | undefined;
  #inFlight = 1;
  #cancel: Cancel | undefined;

  constructor(call: Call, first: Attempt, start: (a: Attempt) => Promise<T>, ends: RaceEnds<T>) {
    this.#call = call;
    this.#first = first;
    this.#start = start;
    this.#ends = ends;
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
    let h: Attempt | undefined;
    try {
      h = this.#call.hedge();
    } catch (error) {
      this.#call.report("hedge", error); // a timer's callback must not throw
      return;
    }
    if (h === undefined) return;
    h.racing = true;
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
    this.#call.raced({ won: a, first: this.#first, raced: other !== undefined });
    if (other === undefined || other.ended) return;
    this.#inFlight--;
    this.#call.raced({ lost: other, usage: this.#ends.usageOf?.(other) });
  }

  #other(a: Attempt): Attempt | undefined {
    return a === this.#first ? this.#second : this.#first;
  }

  follow(a: Attempt, done: Promise<T>): this {
    a.onAnswering(() => this.#decide(a));
    done.then(
      (value) => {
        this.#decide(a);
        if (this.#winner === a) this.#ends.resolve(value);
        else this.#ends.discard?.(value);
      },
      (error: unknown) => this.#failed(a, error),
    );
    return this;
  }

  #failed(a: Attempt, error: unknown): void {
    if (a.raced === "lost") {
      // Cut by the race (booked already), or every attempt dropped (a consumer who left):
      // then the race is over, with nothing won.
      const allLost = this.#first.raced === "lost" && (this.#second?.raced ?? "lost") === "lost";
      if (this.#winner === undefined && allLost) {
        this.#disarm();
        this.#ends.reject(error);
      }
      return;
    }
    if (this.#winner === a || this.#inFlight === 1) {
      this.#disarm();
      if (this.#winner === undefined) this.#call.raced({ goOn: a });
      this.#ends.reject(error);
      return;
    }
    // The other attempt is still in flight: this one is booked, the race goes on.
    this.#inFlight--;
    this.#call.raced({ goOn: this.#other(a)!, failed: { attempt: a, error } });
  }
}
