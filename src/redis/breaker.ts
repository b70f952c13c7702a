import {
  type Breaker,
  type BreakerState,
  CircuitBreaker,
  type CircuitBreakerOptions,
} from "../index.ts";
import { type Fleet, type Member, Script, SLOTS, windowLua } from "./state.ts";

/** Adds this process's outcomes to the fleet's window (the server's clock); opens the
 * fleet's breaker when the fleet's failure share over the window reaches the ratio with
 * enough outcomes, or when this process's own breaker opened; a fresh window follows an
 * opening. Returns the ms the fleet's breaker stays open (0: closed). */
const EXCHANGE = new Script(`${windowLua(2, "a", "f")}
add(ARGV[2], ARGV[3])
local open = redis.call('PTTL', KEYS[1])
if open > 0 then return open end
local a, f = total()
local tripped = a >= tonumber(ARGV[4]) and f * 1000 >= tonumber(ARGV[5]) * a
if tripped or ARGV[7] == '1' then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[6])
  clear()
  return tonumber(ARGV[6])
end
return 0`);

/**
 * A circuit breaker the whole fleet shares (docs/architecture.md, rule 18). Every process
 * adds its outcomes to one window in Redis, so the fleet opens the breaker once the
 * fleet's failure share crosses `failureRatio` over `minimumThroughput` outcomes, long
 * before a process that sends little would have seen enough alone; a process whose own
 * breaker opens first opens it for all, published on the spot. Every process reads it at
 * its next sync. When the open period ends, calls flow again and the fleet's window
 * decides anew. While Redis is unreachable, each process's own breaker decides.
 */
export class SharedBreaker implements Breaker, Member {
  readonly #fleet: Fleet;
  readonly #keys: [string, string];
  readonly #local: CircuitBreaker;
  #fleetOpenUntil = Number.NEGATIVE_INFINITY;
  #attempts = 0;
  #failures = 0;

  constructor(
    fleet: Fleet,
    upstream: string,
    options: Omit<CircuitBreakerOptions, "clock" | "initialState"> = {},
  ) {
    const { onStateChange, ...rest } = options;
    this.#local = new CircuitBreaker({
      ...rest,
      clock: fleet.clock,
      onStateChange: (s) => {
        if (s === "open") void fleet.syncMember(this).catch(() => {}); // tell the fleet now
        onStateChange?.(s);
      },
    });
    this.#fleet = fleet;
    this.#keys = [fleet.key(upstream, "breaker"), fleet.key(upstream, "breaker-window")];
    fleet.join(this);
  }

  #fleetOpen(): boolean {
    return this.#fleet.healthy && this.#fleet.clock.now() < this.#fleetOpenUntil;
  }

  get state(): BreakerState {
    return this.#fleetOpen() ? "open" : this.#local.state;
  }

  tryAcquire(): boolean {
    return this.#fleetOpen() ? false : this.#local.tryAcquire();
  }

  onSuccess(): void {
    this.#attempts++;
    this.#local.onSuccess();
  }

  onFailure(): void {
    this.#attempts++;
    this.#failures++;
    this.#local.onFailure();
  }

  onNeutral(): void {
    this.#local.onNeutral();
  }

  /** Sends this process's outcomes and its own breaker's state, and reads the fleet's
   * breaker (the fleet's loop calls it). */
  async sync(): Promise<void> {
    const o = this.#local.options;
    const attempts = this.#attempts;
    const failures = this.#failures;
    this.#attempts = 0;
    this.#failures = 0;
    const width = Math.max(1, Math.round(o.windowMs / SLOTS));
    const localOpen = this.#local.state === "open" ? "1" : "0";
    let left: number;
    try {
      left = Number(
        await EXCHANGE.run(this.#fleet.client, this.#keys, [
          width,
          attempts,
          failures,
          o.minimumThroughput,
          Math.round(o.failureRatio * 1000),
          Math.max(1, Math.ceil(o.openMs)),
          localOpen,
        ]),
      );
    } catch (error) {
      this.#attempts += attempts;
      this.#failures += failures;
      throw error;
    }
    this.#fleetOpenUntil = left > 0 ? this.#fleet.clock.now() + left : Number.NEGATIVE_INFINITY;
  }
}
