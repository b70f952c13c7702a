import { BreakwaterError, failureOf, reasonOf } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import { CHAIN_SPEC, type FallbackOptions, isRefusal, movesOn, ON_FAILURE } from "./fallback.ts";
import {
  capsOf,
  checkUpstreams,
  type Fallback,
  type Leg,
  type MoveOn,
  Router,
  roomOf,
  type Strategy,
  SWITCH_KINDS,
  type Upstream,
} from "./router.ts";

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

const DAY_MS = 86_400_000;

const SPEC = {
  ...CHAIN_SPEC,
  allowedFails: opt.int({ default: 0 }),
  cooldownMs: opt.num({ max: DAY_MS, default: 5_000 }),
  maxCooldownMs: opt.num({ max: DAY_MS, default: 60_000 }),
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

interface Cooling {
  readonly switchAfterMs: number;
  readonly allowedFails: number;
  readonly cooldownMs: number;
  readonly maxCooldownMs: number;
  readonly when: MoveOn;
}

/** The pool's choice (rule 17): the deployment with the most room among those not cooling
 * down and not yet tried by the call, then the least recently picked; with all cooling,
 * a wait for the earliest recovery within the deadline. */
class Healthiest<T, C> implements Strategy<C> {
  readonly #deps: readonly Upstream<T, C>[];
  readonly #health: Health[];
  readonly #o: Cooling;
  #picks = 0;

  constructor(deps: readonly Upstream<T, C>[], o: Cooling) {
    this.#deps = deps;
    this.#o = o;
    this.#health = deps.map(() => ({ fails: 0, streak: 0, until: -Infinity, lastPicked: 0 }));
  }

  get #clock() {
    return this.#deps[0]!.policy.options.clock;
  }

  first(leg: Leg<C>): Promise<number> {
    return this.#pick(leg, undefined);
  }

  next(_i: number, _f: unknown, leg: Leg<C>, last: unknown): Promise<number> {
    return this.#pick(leg, last);
  }

  /** A 429, an overload or a timeout is not waited out at a deployment while another has
   * room: the call moves there now, and this one cools down (rule 17). */
  retryHere(i: number, f: Failure, error: unknown, leg: Leg<C>): boolean {
    if (!SWITCH_KINDS.has(f.kind) || !this.#o.when(f, "not-retryable", error))
      return ON_FAILURE[f.kind] === "retry-here" && !isRefusal(error);
    return !this.#otherHasRoom(i, leg);
  }

  /** A call waits at a deployment's rate limiter no longer than switching would take,
   * while another deployment has room. */
  maxWaitMs(i: number, leg: Leg<C>): number | undefined {
    return this.#otherHasRoom(i, leg) ? this.#o.switchAfterMs : undefined;
  }

  #otherHasRoom(i: number, leg: Leg<C>): boolean {
    const now = this.#clock.now();
    for (let j = 0; j < this.#deps.length; j++)
      if (j !== i && !leg.tried.has(j) && this.#health[j]!.until <= now && this.#room(j) > 0)
        return true;
    return false;
  }

  #room(i: number): number {
    return roomOf(this.#deps[i]!);
  }

  async #pick(leg: Leg<C>, last: unknown): Promise<number> {
    const now = this.#clock.now();
    let best = -1;
    for (let i = 0; i < this.#deps.length; i++) {
      const h = this.#health[i]!;
      if (leg.tried.has(i) || h.until > now) continue;
      if (best < 0 || this.#better(i, best)) best = i;
    }
    if (best >= 0) {
      this.#health[best]!.lastPicked = ++this.#picks;
      return best;
    }
    return this.#awaitRecovery(leg, now, last);
  }

  #better(i: number, than: number): boolean {
    const a = this.#room(i);
    const b = this.#room(than);
    return a !== b ? a > b : this.#health[i]!.lastPicked < this.#health[than]!.lastPicked;
  }

  /** Every deployment is cooling (or tried): wait for the first to recover, within the
   * deadline (the call's, the run's); else give up with `pool-cooldown`. */
  async #awaitRecovery(leg: Leg<C>, now: number, last: unknown): Promise<number> {
    let next = -1;
    for (let i = 0; i < this.#deps.length; i++) {
      const until = this.#health[i]!.until;
      if (until > now && (next < 0 || until < this.#health[next]!.until)) next = i;
    }
    if (next < 0) return -1; // all tried, none cooling: the caller sees the last error
    const at = this.#health[next]!.until;
    if (at > leg.deadline(now))
      throw new BreakwaterError("pool-cooldown", {
        cause: last,
        ledger: leg.ledger,
        failure: failureOf(last),
        retryAfterMs: at - now,
      });
    await this.#clock.sleep(at - now, leg.signal);
    // Told and booked by the call the next hop makes (its policy's onWait, its ledger).
    const failure = failureOf(last);
    leg.waited = { ms: at - now, why: "cooldown", ...(failure && { failure }) };
    leg.tried.delete(next);
    return this.#pick(leg, last);
  }

  /** A deployment gave up on a call in a way that moves it on: count it, and cool the
   * deployment down once it has failed more than allowed. */
  moves(i: number, error: unknown): boolean {
    if (!this.#o.when(failureOf(error), reasonOf(error), error)) return false;
    const h = this.#health[i]!;
    const o = this.#o;
    const hint = failureOf(error)?.retryAfterMs ?? (error as BreakwaterError)?.retryAfterMs ?? 0;
    const now = this.#clock.now();
    // Refused at its own limiter (no room in time, or longer than switching takes): nothing
    // failed there, so no streak; it rests only as long as its limiter said.
    if (reasonOf(error) === "rate-limit-wait") {
      h.until = Math.max(h.until, now + Math.min(o.maxCooldownMs, hint));
      return true;
    }
    // Calls that were in flight when it went down fail together: one cooldown, not a
    // streak of them (a Retry-After may still lengthen it).
    if (h.until > now) {
      h.until = Math.max(h.until, now + Math.min(o.maxCooldownMs, hint));
      return true;
    }
    if (++h.fails <= o.allowedFails) return true;
    const own = Math.min(o.maxCooldownMs, o.cooldownMs * 2 ** h.streak);
    h.until = now + Math.min(o.maxCooldownMs, Math.max(hint, own));
    h.streak++;
    h.fails = 0;
    return true;
  }

  succeeded(i: number): void {
    const h = this.#health[i]!;
    h.fails = 0;
    h.streak = 0;
  }

  cooldowns(): Record<string, number> {
    return Object.fromEntries(this.#deps.map((d, i) => [d.name, this.#health[i]!.until]));
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
  const strategy = new Healthiest(deps, { ...o, when: o.when ?? movesOn });
  // By default each deployment may be tried twice: again after it recovers.
  const caps = capsOf(deps, o.maxAttempts, 2);
  const router = new Router(deps, strategy, { deadlineMs: o.deadlineMs, ...caps }, v);
  return {
    limits: router.limits,
    execute: (call) => router.execute(call),
    stream: (call) => router.stream(call),
    cooldowns: () => strategy.cooldowns(),
  };
}
