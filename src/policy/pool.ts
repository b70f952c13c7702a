import { BreakwaterError, failureOf, reasonOf } from "../core/errors.ts";
import type { Ledger } from "../core/ledger.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import { partsOf } from "../run/internal.ts";
import {
  beginLeg,
  type ChainCallOptions,
  checkUpstreams,
  type Fallback,
  type FallbackOptions,
  type Hops,
  type Leg,
  movesOn,
  streamChain,
  type Upstream,
} from "./fallback.ts";
import type { StreamOptions } from "./stream-options.ts";

/** Options of a deployment `pool`. */
export interface PoolOptions extends FallbackOptions {
  /** Attempts across the pool. @default twice the sum of the deployments' maxAttempts
   * (each may be tried again once it recovers) */
  maxAttempts?: number;
  /** Failures a deployment may have before it cools down (each is already what its
   * policy gave up on). @default 0 */
  allowedFails?: number;
  /** The first cooldown; each one that follows without a success in between doubles it.
   * A Retry-After longer than this is honoured instead. @default 5000 */
  cooldownMs?: number;
  /** The longest cooldown. @default 60000 */
  maxCooldownMs?: number;
}

const SPEC = {
  deadlineMs: opt.ms(),
  maxAttempts: opt.int({ min: 1, default: Number.POSITIVE_INFINITY, infinite: true }),
  when: opt.fn<NonNullable<FallbackOptions["when"]>>(),
  allowedFails: opt.int({ default: 0 }),
  cooldownMs: opt.num({ max: 86_400_000, default: 5_000 }),
  maxCooldownMs: opt.num({ max: 86_400_000, default: 60_000 }),
};

/** One deployment's health: failures since its last success, cooldowns in a row, and the
 * time it may take calls again. */
interface Health {
  fails: number;
  streak: number;
  until: number;
  lastPicked: number;
}

/** A pool: one logical model over several deployments (`forContextExceeded` has no
 * meaning here: every deployment serves the same model). */
export type Pool<T, C = unknown> = Fallback<T, C> & {
  /** When each deployment may take calls again (its cooldown; now or earlier: it may). */
  readonly cooldowns: () => Record<string, number>;
};

class DeploymentPool<T, C> {
  readonly #deps: readonly Upstream<T, C>[];
  readonly #health: Health[];
  readonly #o: Required<PoolOptions>;
  readonly #v: Validator;
  #picks = 0;

  constructor(deps: readonly Upstream<T, C>[], o: Required<PoolOptions>, v: Validator) {
    this.#deps = deps;
    this.#o = o;
    this.#v = v;
    this.#health = deps.map(() => ({ fails: 0, streak: 0, until: -Infinity, lastPicked: 0 }));
  }

  get #clock() {
    return this.#deps[0]!.policy.options.clock;
  }

  /** A deployment's room: its rate limiter's headroom; none while its breaker is open. */
  #room(i: number): number {
    const { limiter, breaker } = this.#deps[i]!.policy.options;
    if (breaker?.state === "open") return -1;
    return limiter?.headroom() ?? 1;
  }

  /** The deployment for a call's next hop: among those not cooling and not yet tried by
   * this call, the most room, then the least recently picked (spreads the load). When
   * none is left, waits for the earliest recovery if the call's deadline allows. */
  async pick(
    tried: Set<number>,
    leg: Leg<C>,
    call: ChainCallOptions | undefined,
    last?: unknown,
  ): Promise<number> {
    const now = this.#clock.now();
    let best = -1;
    for (let i = 0; i < this.#deps.length; i++) {
      const h = this.#health[i]!;
      if (tried.has(i) || h.until > now) continue;
      if (best < 0 || this.#better(i, best)) best = i;
    }
    if (best >= 0) {
      this.#health[best]!.lastPicked = ++this.#picks;
      return best;
    }
    return this.#awaitRecovery(tried, leg, call, now, last);
  }

  #better(i: number, than: number): boolean {
    const a = this.#room(i);
    const b = this.#room(than);
    return a !== b ? a > b : this.#health[i]!.lastPicked < this.#health[than]!.lastPicked;
  }

  /** Every deployment is cooling (or tried): wait for the first to recover, within the
   * deadline (the call's, the run's); else give up with `pool-cooldown`. */
  async #awaitRecovery(
    tried: Set<number>,
    leg: Leg<C>,
    call: ChainCallOptions | undefined,
    now: number,
    last: unknown,
  ): Promise<number> {
    let next = -1;
    for (let i = 0; i < this.#deps.length; i++)
      if (
        this.#health[i]!.until > now &&
        (next < 0 || this.#health[i]!.until < this.#health[next]!.until)
      )
        next = i;
    if (next < 0) return -1; // all tried, none cooling: the caller sees the last error
    const at = this.#health[next]!.until;
    const run = call?.run === undefined ? undefined : partsOf(call.run)?.limits;
    const deadline = Math.min(leg.deadlineAt, run?.callDeadline(now) ?? Infinity);
    if (at > deadline)
      throw new BreakwaterError("pool-cooldown", {
        cause: last,
        ledger: leg.ledger,
        failure: failureOf(last),
        retryAfterMs: at - now,
      });
    await this.#clock.sleep(at - now, call?.signal);
    tried.delete(next);
    return this.pick(tried, leg, call, last);
  }

  /** A deployment gave up on a call in a way that moves it on: count it, and cool the
   * deployment down once it has failed more than allowed. */
  failed(i: number, error: unknown): void {
    const h = this.#health[i]!;
    const o = this.#o;
    const hint = failureOf(error)?.retryAfterMs ?? (error as BreakwaterError)?.retryAfterMs ?? 0;
    const now = this.#clock.now();
    // Calls that were in flight when it went down fail together: one cooldown, not a
    // streak of them (a Retry-After may still lengthen it).
    if (h.until > now) {
      h.until = Math.max(h.until, now + Math.min(o.maxCooldownMs, hint));
      return;
    }
    if (++h.fails <= o.allowedFails) return;
    const own = Math.min(o.maxCooldownMs, o.cooldownMs * 2 ** h.streak);
    h.until = now + Math.min(o.maxCooldownMs, Math.max(hint, own));
    h.streak++;
    h.fails = 0;
  }

  succeeded(i: number): void {
    const h = this.#health[i]!;
    h.fails = 0;
    h.streak = 0;
  }

  /** After a hop failed: whether the call moves on (and the deployment is charged). */
  moves(i: number, error: unknown, ledger: Ledger): boolean {
    const f = failureOf(error);
    if (!this.#o.when(f, reasonOf(error), error)) return false;
    this.failed(i, error);
    return ledger.attempts.length < this.#o.maxAttempts;
  }

  leg(call: ChainCallOptions | undefined): Leg<C> {
    return beginLeg(this.#v, this.#clock, this.#o.deadlineMs, this.#o.maxAttempts, call);
  }

  cooldowns(): Record<string, number> {
    return Object.fromEntries(this.#deps.map((d, i) => [d.name, this.#health[i]!.until]));
  }

  async execute(call?: ChainCallOptions): Promise<T> {
    const leg = this.leg(call);
    const tried = new Set<number>();
    let last: unknown;
    for (;;) {
      const i = await this.pick(tried, leg, call, last);
      if (i < 0) throw last;
      const d = this.#deps[i]!;
      const op = d.call ?? this.#v.fail(`deployments[${i}].call`, undefined, "a function");
      try {
        const value = await d.policy.execute(op, leg.hop(d));
        this.succeeded(i);
        return value;
      } catch (error) {
        if (!this.moves(i, error, leg.ledger)) throw error;
        tried.add(i);
        last = error;
      }
    }
  }

  stream(call: ChainCallOptions & Omit<StreamOptions<C>, "signal" | "run"> = {}) {
    const leg = this.leg(call);
    const { signal: _s, run: _r, ...rest } = call;
    const tried = new Set<number>();
    let last: unknown;
    const hops: Hops = {
      first: () => this.pick(tried, leg, call),
      onward: async (i, error, ledger) => {
        if (!this.moves(i, error, ledger)) return -1;
        tried.add(i);
        last = error;
        const next = await this.pick(tried, leg, call, last);
        if (next < 0) throw last;
        return next;
      },
      done: (i) => this.succeeded(i),
    };
    const hop = (u: Upstream<T, C>) => ({ ...rest, ...leg.hop(u) });
    return streamChain(hops, this.#deps, leg.ledger, hop, this.#v);
  }
}

/**
 * One logical model over several deployments (keys, regions, Azure deployments,
 * providers), as LiteLLM's router does (docs/architecture.md, rule 17): each call goes to
 * the deployment with the most rate-limit headroom (then the least recently used) among
 * those not cooling down; a deployment that gives up on a call in a way that moves it on
 * cools down for max(Retry-After, `cooldownMs` doubled per cooldown in a row), capped at
 * `maxCooldownMs`; the call goes to the next deployment, and when all are cooling it waits
 * for the earliest recovery if its deadline allows. One deadline, attempt cap and ledger
 * per call, counted on the run, as a `fallback` chain's.
 */
export function pool<T, C = unknown>(
  deployments: readonly Upstream<T, C>[],
  options: PoolOptions = {},
): Pool<T, C> {
  const v = new Validator("pool");
  const deps = checkUpstreams(v, deployments) as readonly Upstream<T, C>[];
  const o = parseOptions(v, SPEC, options);
  if (o.maxCooldownMs < o.cooldownMs)
    v.fail("maxCooldownMs", o.maxCooldownMs, `a number >= cooldownMs (${o.cooldownMs})`);
  // By default each deployment may be tried twice: again after it recovers.
  const all = 2 * deps.reduce((n, u) => n + u.policy.options.maxAttempts, 0);
  const maxAttempts = o.maxAttempts === Number.POSITIVE_INFINITY ? all : o.maxAttempts;
  const p = new DeploymentPool(deps, { ...o, maxAttempts, when: o.when ?? movesOn }, v);
  return {
    execute: (call) => p.execute(call),
    stream: (call) => p.stream(call),
    cooldowns: () => p.cooldowns(),
  };
}
