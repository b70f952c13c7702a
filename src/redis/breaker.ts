import {
  type Breaker,
  type BreakerState,
  CircuitBreaker,
  type CircuitBreakerOptions,
} from "../index.ts";
import { type Fleet, type Member, Script } from "./state.ts";

/** Opens the fleet's breaker for `ms` (never shortening one already open); returns the ms
 * it stays open (0: closed). */
const OPEN = new Script(`
if tonumber(ARGV[1]) > 0 then
  local left = redis.call('PTTL', KEYS[1])
  if left < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then return 0 end
return left`);

/**
 * A circuit breaker the whole fleet shares (docs/architecture.md, rule 18): each process
 * keeps its own `CircuitBreaker`; the first to open it opens it for every process at once
 * (published on the spot, and read by every process at its next sync), so a dead upstream
 * is found once, not by each process alone. When the fleet's open period ends, each
 * process's own breaker probes again. While Redis is unreachable, each breaker is its
 * process's own.
 */
export class SharedBreaker implements Breaker, Member {
  readonly #fleet: Fleet;
  readonly #key: string;
  readonly #local: CircuitBreaker;
  readonly #openMs: number;
  #fleetOpenUntil = Number.NEGATIVE_INFINITY;
  #pending: Promise<void> | undefined;

  constructor(fleet: Fleet, upstream: string, options: Omit<CircuitBreakerOptions, "clock"> = {}) {
    const { onStateChange, ...rest } = options;
    this.#local = new CircuitBreaker({
      ...rest,
      onStateChange: (s) => {
        if (s === "open") void this.#publish();
        onStateChange?.(s);
      },
    });
    this.#openMs = this.#local.options.openMs;
    this.#fleet = fleet;
    this.#key = fleet.key(upstream, "breaker");
    fleet.join(this);
  }

  #fleetOpen(): boolean {
    return this.#fleet.healthy && Date.now() < this.#fleetOpenUntil;
  }

  get state(): BreakerState {
    return this.#fleetOpen() ? "open" : this.#local.state;
  }

  tryAcquire(): boolean {
    return this.#fleetOpen() ? false : this.#local.tryAcquire();
  }

  onSuccess(): void {
    this.#local.onSuccess();
  }

  onFailure(): void {
    this.#local.onFailure();
  }

  onNeutral(): void {
    this.#local.onNeutral();
  }

  /** Tells the fleet at once; a failure here is left to the next sync. */
  async #publish(): Promise<void> {
    try {
      await this.#exchange(this.#openMs);
    } catch {}
  }

  async #exchange(openMs: number): Promise<void> {
    const left = Number(await OPEN.run(this.#fleet.client, [this.#key], [openMs]));
    this.#fleetOpenUntil = left > 0 ? Date.now() + left : Number.NEGATIVE_INFINITY;
  }

  /** Publishes this process's open breaker and reads the fleet's (the fleet's loop calls
   * it). */
  sync(): Promise<void> {
    const open = this.#local.state === "open" ? this.#openMs : 0;
    this.#pending ??= this.#exchange(open).finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }
}
