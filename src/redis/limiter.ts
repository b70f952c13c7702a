import type { AcquireOptions, Cost, Limiter, Permit, Spend } from "../index.ts";
import { LIMITS, needOf, spentOf } from "../internal.ts";
import { type Fleet, type Member, Script } from "./state.ts";

/** Past this long without a good sync, what the others spent meanwhile is no longer owed:
 * it has left the limits' window (a minute) by now. */
const WINDOW_MS = 60_000;

/**
 * One sync of a limiter with its fleet: publishes the longest hold heard here (a no-op at
 * 0) and what this process's spending changed by since its last sync, added to the fleet's
 * running totals and to this minute's (by Redis's clock; the minute before last is let go);
 * all lapse two minutes after the fleet's last sync. Returns the fleet's hold left in ms,
 * the totals after this process's part (one per limit), whether they were there before (1)
 * or began with this sync (0), and the spending of this minute and the last (one per
 * limit: what a process that joins now owes).
 */
const EXCHANGE = new Script(`
local want = tonumber(ARGV[1])
if want > 0 and redis.call('PTTL', KEYS[1]) < want then
  redis.call('SET', KEYS[1], '1', 'PX', want)
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then left = 0 end
local existed = redis.call('EXISTS', KEYS[2])
local minute = math.floor(tonumber(redis.call('TIME')[1]) / 60)
local out = { left }
for i = 1, 4 do
  local n = tonumber(ARGV[i + 1])
  local now, before = i .. ':' .. minute, i .. ':' .. (minute - 1)
  if n ~= 0 then
    redis.call('HINCRBYFLOAT', KEYS[2], tostring(i), n)
    redis.call('HINCRBYFLOAT', KEYS[2], now, n)
  end
  redis.call('HDEL', KEYS[2], i .. ':' .. (minute - 2))
  out[i + 1] = redis.call('HGET', KEYS[2], tostring(i)) or '0'
  out[i + 6] = tostring(tonumber(redis.call('HGET', KEYS[2], now) or '0')
    + tonumber(redis.call('HGET', KEYS[2], before) or '0'))
end
redis.call('PEXPIRE', KEYS[2], 120000)
out[6] = existed
return out`);

/**
 * A rate limiter whose 429 holds and whose spending the fleet shares (docs/architecture.md,
 * rule 18): the process that hears a Retry-After holds its own limiter and publishes the
 * hold on the spot; every other process holds its own at its next sync, for what is left of
 * it. What each process lets go is added to the fleet's totals at its sync (what a call was
 * expected to take, corrected by what it spent once it ends; nothing for one never sent),
 * and what the others let go since is taken from its own buckets, so N processes under one
 * key's limits spend its limits once, not N times (within one sync's worth). An answer's
 * rate-limit headers, which count the whole key's spending, correct the buckets they name,
 * and the local limiter does not take the others' spending of that sync from those again
 * (`Limiter.spend`). A process that joins owes what the others spent this minute and the
 * last. The buckets, the queue and the concurrency stay the process's own limiter's. While
 * Redis is unreachable, each process holds for what it heard and spends from what it knows;
 * what it spent meanwhile is published when Redis is back, and after more than a minute
 * away it owes, as one joining, what is still in the window.
 */
export class SharedLimiter implements Limiter, Member {
  readonly #local: Limiter;
  readonly #fleet: Fleet;
  readonly #keys: [string, string];
  /** The longest hold heard here since the last sync, in ms. */
  #heard = 0;
  /** What this process's spending changed by since its last sync, by limit. */
  readonly #mine = [0, 0, 0, 0];
  /** The fleet's totals at the last good sync (undefined before the first). */
  #totals: number[] | undefined;
  #syncedAt = Number.NEGATIVE_INFINITY;

  constructor(fleet: Fleet, upstream: string, local: Limiter) {
    this.#local = local;
    this.#fleet = fleet;
    this.#keys = [fleet.key(upstream, "hold"), fleet.key(upstream, "spent")];
    fleet.join(this);
  }

  tryAcquire(cost: Cost, group?: object): Permit | undefined {
    const permit = this.#local.tryAcquire(cost, group);
    return permit === undefined ? undefined : this.#counted(permit, cost);
  }

  async acquire(cost: Cost, options?: AcquireOptions): Promise<Permit> {
    return this.#counted(await this.#local.acquire(cost, options), cost);
  }

  /** `permit`, its call's spending counted: what it takes now, corrected when it ends. */
  #counted(permit: Permit, cost: Cost): Permit {
    const need = needOf(cost);
    this.#count(need, 1);
    const { settle, cancel } = permit;
    let open = true;
    permit.settle = (actual, end) => {
      if (open) {
        open = false;
        this.#count(spentOf(cost, actual), 1);
        this.#count(need, -1);
      }
      settle.call(permit, actual, end);
    };
    permit.cancel = () => {
      if (open) {
        open = false;
        this.#count(need, -1); // never sent: nothing spent
      }
      cancel.call(permit);
    };
    return permit;
  }

  #count(spent: Spend, sign: 1 | -1): void {
    LIMITS.forEach((d, i) => {
      const n = spent[d];
      if (n !== undefined && Number.isFinite(n)) this.#mine[i]! += sign * n;
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
      // Not published: kept for the next sync. (A reply lost after the script ran would
      // publish it twice: an overcount of one sync's spending, on the safe side.)
      this.#heard = Math.max(this.#heard, heard);
      mine.forEach((n, i) => {
        this.#mine[i]! += n;
      });
      throw error;
    }
    const left = Number(reply[0]);
    if (left > this.heldForMs()) this.#local.hold(left);
    const totals = reply.slice(1, 5).map(Number);
    this.#owe(totals, reply.slice(6, 10).map(Number), mine, Number(reply[5]) === 1);
  }

  /** Tells the local limiter what the fleet spent since the last sync, less this process's
   * own part: on its first sync, what the others spent this minute and the last (a process
   * that joins, or comes back after a minute away, owes what is still in the window);
   * nothing on totals begun anew. It is told at every sync, nothing or not: what it counts
   * as "since the last call". */
  #owe(totals: number[], recent: number[], mine: number[], kept: boolean): void {
    const before = this.#totals;
    const now = this.#fleet.clock.now();
    const joining = before === undefined || now - this.#syncedAt > WINDOW_MS;
    this.#totals = totals;
    this.#syncedAt = now;
    const others: { -readonly [D in (typeof LIMITS)[number]]?: number } = {};
    if (kept)
      LIMITS.forEach((d, i) => {
        const n = joining ? recent[i]! - mine[i]! : totals[i]! - before![i]! - mine[i]!;
        // Joining owes only spending (a process back from a minute away may owe some of its
        // own from before, on the safe side).
        if (Math.abs(n) > 1e-9 && (!joining || n > 0)) others[d] = n;
      });
    this.#local.spend?.(others);
  }
}

/** @deprecated The earlier name of `SharedLimiter`, from when only the holds were shared. */
export const SharedHoldLimiter = SharedLimiter;
/** @deprecated The earlier name of `SharedLimiter`. */
export type SharedHoldLimiter = SharedLimiter;
