import type { AcquireOptions, Cost, Limiter, Permit, Spend } from "../index.ts";
import { needOf } from "../internal.ts";
import { type Fleet, type Member, Script } from "./state.ts";

/** The limits a fleet's spending is counted in, in the order the script takes them. */
const DIMS = ["requests", "tokens", "inputTokens", "outputTokens"] as const;

/**
 * One sync of a limiter with its fleet: publishes the longest hold heard here (a no-op at
 * 0) and what this process spent since its last sync (added to the fleet's running totals,
 * kept two minutes past the last spend); returns the fleet's hold left in ms and the
 * totals after this process's part, one per limit.
 */
const EXCHANGE = new Script(`
local want = tonumber(ARGV[1])
if want > 0 and redis.call('PTTL', KEYS[1]) < want then
  redis.call('SET', KEYS[1], '1', 'PX', want)
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then left = 0 end
local out = { left }
for i = 1, 4 do
  local n = tonumber(ARGV[i + 1])
  if n > 0 then redis.call('HINCRBYFLOAT', KEYS[2], tostring(i), n) end
  out[i + 1] = redis.call('HGET', KEYS[2], tostring(i)) or '0'
end
redis.call('PEXPIRE', KEYS[2], 120000)
return out`);

/**
 * A rate limiter whose 429 holds and whose spending the fleet shares (docs/architecture.md,
 * rule 18): the process that hears a Retry-After holds its own limiter and publishes the
 * hold on the spot; every other process holds its own at its next sync, for what is left of
 * it. What each process lets go is added to the fleet's totals at its sync, and what the
 * others let go since is taken from its own buckets, so N processes under one key's limits
 * spend its limits once, not N times (within one sync's worth). The buckets, the queue and
 * the concurrency stay the process's own limiter's, corrected by every answer's headers.
 * While Redis is unreachable, each process holds for what it heard and spends from what it
 * knows; what it spent meanwhile is published when Redis is back.
 */
export class SharedLimiter implements Limiter, Member {
  readonly #local: Limiter;
  readonly #fleet: Fleet;
  readonly #keys: [string, string];
  /** The longest hold heard here since the last sync, in ms. */
  #heard = 0;
  /** What this process let go since its last sync, by limit. */
  readonly #mine = [0, 0, 0, 0];
  /** The fleet's totals at the last sync (undefined before the first: what was spent
   * before a process joined is in the headers it will hear, not owed again). */
  #totals: number[] | undefined;

  constructor(fleet: Fleet, upstream: string, local: Limiter) {
    this.#local = local;
    this.#fleet = fleet;
    this.#keys = [fleet.key(upstream, "hold"), fleet.key(upstream, "spent")];
    fleet.join(this);
  }

  tryAcquire(cost: Cost, group?: object): Permit | undefined {
    const permit = this.#local.tryAcquire(cost, group);
    if (permit !== undefined) this.#spent(cost);
    return permit;
  }

  async acquire(cost: Cost, options?: AcquireOptions): Promise<Permit> {
    const permit = await this.#local.acquire(cost, options);
    this.#spent(cost);
    return permit;
  }

  #spent(cost: Cost): void {
    const need = needOf(cost);
    DIMS.forEach((d, i) => {
      this.#mine[i]! += need[d] ?? 0;
    });
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

  spend(spent: Spend): void {
    this.#local.spend?.(spent);
  }

  /** Publishes the hold heard here and what was spent; holds for the fleet's hold and
   * spends what the others spent (the fleet's loop calls it). */
  async sync(): Promise<void> {
    const heard = Math.ceil(this.#heard);
    const mine = this.#mine.splice(0, 4, 0, 0, 0, 0);
    this.#heard = 0;
    let reply: unknown[];
    try {
      reply = (await EXCHANGE.run(this.#fleet.client, this.#keys, [heard, ...mine])) as unknown[];
    } catch (error) {
      // Not published: kept for the next sync.
      this.#heard = Math.max(this.#heard, heard);
      mine.forEach((n, i) => {
        this.#mine[i]! += n;
      });
      throw error;
    }
    const left = Number(reply[0]);
    if (left > this.heldForMs()) this.#local.hold(left);
    this.#owe(reply.slice(1).map(Number), mine);
  }

  /** Spends what the fleet spent since the last sync, less this process's own part. */
  #owe(totals: number[], mine: number[]): void {
    const before = this.#totals;
    this.#totals = totals;
    // The first sync, or the totals lapsed (no spending for two minutes): nothing owed.
    if (before === undefined || totals.some((t, i) => t < before[i]!)) return;
    const others: { -readonly [D in (typeof DIMS)[number]]?: number } = {};
    DIMS.forEach((d, i) => {
      const n = totals[i]! - before[i]! - mine[i]!;
      if (n > 0) others[d] = n;
    });
    if (Object.keys(others).length > 0) this.#local.spend?.(others);
  }
}

/** @deprecated The earlier name of `SharedLimiter`, from when only the holds were shared. */
export const SharedHoldLimiter = SharedLimiter;
/** @deprecated The earlier name of `SharedLimiter`. */
export type SharedHoldLimiter = SharedLimiter;
