import { type Admission, RetryBudget, type RetryBudgetOptions } from "../index.ts";
import { opt, parseOptions } from "../internal.ts";
import { type Fleet, type Member, Script } from "./state.ts";

/** Options of a shared retry budget: a RetryBudget's, and how many tokens a process takes
 * from the fleet's bucket at a time. */
export interface SharedRetryBudgetOptions extends RetryBudgetOptions {
  /** Tokens each process holds between syncs: its retries need no round trip. @default 2 */
  leaseTokens?: number;
}

const MILLI = 1000;
const LEASE_SPEC = { leaseTokens: opt.int({ min: 1, default: 2 }) };

/** Deposits what the process earned and tops its lease up: one atomic step on the
 * fleet's bucket (in thousandths of a token). */
const LEASE = new Script(`
local max = tonumber(ARGV[1])
local level = tonumber(redis.call('GET', KEYS[1]) or max)
level = math.min(max, level + tonumber(ARGV[2]))
local grant = math.min(tonumber(ARGV[3]), math.floor(level / 1000) * 1000)
level = level - grant
redis.call('SET', KEYS[1], level)
return {grant, level}`);

/**
 * A retry budget shared by every process of a fleet (docs/architecture.md, rule 18): one
 * bucket per upstream in Redis, which each process draws on through a small local lease, so
 * a retry decision is a local subtraction. Every `syncMs` a process deposits what its
 * successes earned and tops its lease up to `leaseTokens` (the lease is never taken away
 * during a sync, so no retry waits on one). The fleet can never spend more than the bucket
 * holds; a process's view of it is at most one sync old; up to `leaseTokens` per process
 * sit in leases. While Redis is unreachable the process decides on its own RetryBudget.
 */
export class SharedRetryBudget implements Admission, Member {
  readonly #fleet: Fleet;
  readonly #key: string;
  readonly #local: RetryBudget;
  readonly #wantMilli: number;
  readonly #maxMilli: number;
  readonly #ratioMilli: number;
  #leaseMilli = 0;
  #depositMilli = 0;
  #fleetMilli: number;

  constructor(fleet: Fleet, upstream: string, options: SharedRetryBudgetOptions = {}) {
    const { leaseTokens, ...budget } = options;
    this.#local = new RetryBudget(budget); // checks maxTokens and tokenRatio
    const lease = parseOptions("SharedRetryBudget", LEASE_SPEC, { leaseTokens }).leaseTokens;
    this.#fleet = fleet;
    this.#key = fleet.key(upstream, "budget");
    this.#wantMilli = lease * MILLI;
    this.#maxMilli = Math.round(this.#local.maxTokens * MILLI);
    this.#ratioMilli = Math.round(this.#local.tokenRatio * MILLI);
    this.#fleetMilli = this.#maxMilli;
    fleet.join(this);
  }

  /** The fleet's tokens as of the last sync (this process's lease not included). */
  get fleetTokens(): number {
    return this.#fleetMilli / MILLI;
  }

  /** Tokens this process holds now. */
  get leaseTokens(): number {
    return this.#leaseMilli / MILLI;
  }

  tryAcquire(): boolean {
    if (!this.#fleet.healthy) return this.#local.tryAcquire();
    if (this.#leaseMilli >= MILLI) {
      this.#leaseMilli -= MILLI;
      return true;
    }
    void this.#fleet.sync(); // a new lease for the next retry; this one is refused now
    return false;
  }

  onSuccess(): void {
    this.#depositMilli += this.#ratioMilli;
    this.#local.onSuccess();
  }

  refund(): void {
    if (this.#fleet.healthy) this.#leaseMilli += MILLI;
    else this.#local.refund();
  }

  /** Sends what this process counted since the last sync and reads the fleet's state
   * (one Lua script; the fleet's loop calls it). */
  async sync(): Promise<void> {
    const deposit = this.#depositMilli;
    this.#depositMilli = 0;
    const want = Math.max(0, this.#wantMilli - this.#leaseMilli);
    try {
      const [grant, level] = (await LEASE.run(
        this.#fleet.client,
        [this.#key],
        [this.#maxMilli, deposit, want],
      )) as [number, number];
      this.#leaseMilli += Number(grant);
      this.#fleetMilli = Number(level);
    } catch (error) {
      // Not known to be applied: the deposit goes with the next sync (a reply lost after
      // the script ran credits it twice, at most one interval's worth).
      this.#depositMilli += deposit;
      throw error;
    }
  }
}
