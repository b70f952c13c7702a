import {
  type Breaker,
  type BreakerState,
  CircuitBreaker,
  type CircuitBreakerOptions,
} from "../index.ts";
import { type Fleet, type Member, Script } from "./state.ts";

const SLOTS = 10;

/** Adds this process's outcomes to the fleet's window (the server's clock); opens the
 * fleet's breaker when the fleet's failure share over the window reaches the ratio with
 * enough outcomes, or when this process's own breaker opened; a fresh window follows an
 * opening. Returns the ms the fleet's breaker stays open (0: closed). */
const EXCHANGE = new Script(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local width = tonumber(ARGV[1])
local slot = math.floor(now / width)
if tonumber(ARGV[2]) > 0 then
  local key = KEYS[2] .. ':' .. slot
  redis.call('HINCRBY', key, 'a', ARGV[2])
  redis.call('HINCRBY', key, 'f', ARGV[3])
  redis.call('PEXPIRE', key, width * ${SLOTS + 1})
end
local open = redis.call('PTTL', KEYS[1])
if open > 0 then return open end
local a, f = 0, 0
for i = 0, ${SLOTS - 1} do
  local v = redis.call('HMGET', KEYS[2] .. ':' .. (slot - i), 'a', 'f')
  a = a + (tonumber(v[1]) or 0)
  f = f + (tonumber(v[2]) or 0)
end
local tripped = a >= tonumber(ARGV[4]) and f * 1000 >= tonumber(ARGV[5]) * a
if tripped or ARGV[7] == '1' then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[6])
  for i = 0, ${SLOTS - 1} do redis.call('DEL', KEYS[2] .. ':' .. (slot - i)) end
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
  #pending: Promise<void> | undefined;

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
        if (s === "open") void this.sync().catch(() => {}); // tell the fleet now
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
  sync(): Promise<void> {
    this.#pending ??= this.#exchange().finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  async #exchange(): Promise<void> {
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
