import type { AcquireOptions, Cost, Limiter, Permit } from "../index.ts";
import { type Fleet, type Member, Script } from "./state.ts";

/** Publishes the longest hold heard here (a no-op at 0) and returns the fleet's, in ms. */
const EXCHANGE = new Script(`
local want = tonumber(ARGV[1])
if want > 0 and redis.call('PTTL', KEYS[1]) < want then
  redis.call('SET', KEYS[1], '1', 'PX', want)
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then return 0 end
return left`);

/**
 * A rate limiter whose 429 holds the fleet shares (docs/architecture.md, rule 18): the
 * process that hears a Retry-After holds its own limiter and publishes the hold on the spot;
 * every other process holds its own at its next sync, for what is left of it. Everything
 * else (the buckets learned from headers, the queue, the concurrency) stays the process's
 * own limiter's. While Redis is unreachable, each process holds for what it heard itself.
 */
export class SharedHoldLimiter implements Limiter, Member {
  readonly #local: Limiter;
  readonly #fleet: Fleet;
  readonly #key: string;
  /** The longest hold heard here since the last sync, in ms. */
  #heard = 0;

  constructor(fleet: Fleet, upstream: string, local: Limiter) {
    this.#local = local;
    this.#fleet = fleet;
    this.#key = fleet.key(upstream, "hold");
    fleet.join(this);
  }

  tryAcquire(cost: Cost, group?: object): Permit | undefined {
    return this.#local.tryAcquire(cost, group);
  }

  acquire(cost: Cost, options?: AcquireOptions): Promise<Permit> {
    return this.#local.acquire(cost, options);
  }

  observeHeaders(headers: unknown, wallNow?: number): void {
    this.#local.observeHeaders(headers, wallNow);
  }

  hold(ms: number): void {
    this.#local.hold(ms);
    if (!(ms > this.#heard)) return;
    this.#heard = ms;
    void this.#fleet.syncMember(this).catch(() => {}); // tell the fleet now
  }

  heldForMs(): number {
    return this.#local.heldForMs?.() ?? 0;
  }

  headroom(): number {
    return this.#local.headroom();
  }

  get calm(): boolean | undefined {
    return this.#local.calm;
  }

  /** Publishes the hold heard here, and holds for the fleet's (the fleet's loop calls it). */
  async sync(): Promise<void> {
    const heard = Math.ceil(this.#heard);
    this.#heard = 0;
    let left: number;
    try {
      left = Number(await EXCHANGE.run(this.#fleet.client, [this.#key], [heard]));
    } catch (error) {
      this.#heard = Math.max(this.#heard, heard);
      throw error;
    }
    if (left > this.heldForMs()) this.#local.hold(left);
  }
}
