import type { Breaker } from "../core/breaker.ts";
import type { Admission } from "../core/budget.ts";
import type { GiveUpReason } from "../core/errors.ts";
import { type Failure, KINDS } from "../core/failure.ts";
import { type Cost, type Limiter, type Permit, RateLimitWaitError } from "../core/limiter.ts";
import { isA } from "../core/safe.ts";
import type { AttemptEnd, Grant, Reporter } from "./attempt.ts";

/** What a gate is asked for one attempt. */
export interface GateRequest {
  /** What the attempt is expected to spend (the rate limiter's estimate). */
  readonly cost: Cost;
  /** The run tree the call belongs to (fairness, per-run caps). */
  readonly group: object | undefined;
  /** Higher goes first in a queue. */
  readonly priority: number;
  /** The call's run has had an answer (or it has no run): of equal priority, it goes
   * before the calls of runs that have paid for nothing yet (rule 23). */
  readonly started: boolean;
  /** The call's deadline on the policy's clock. */
  readonly deadlineAt: number;
  /** A wait for room at a gate may not pass this: the deadline, or sooner when the call
   * says how long it waits (`maxWaitMs`: a chain whose next upstream has room). */
  readonly waitUntil: number;
  /** The longest a 429's hold on every call may keep this one: a wait the upstream asked
   * for, capped as a Retry-After is (`maxWaitMs`, else `retryAfter.maxMs`; the deadline). */
  readonly holdMs: number;
  /** Ends a wait at once: the caller's abort, or a stream's consumer leaving. */
  readonly cancel: AbortSignal | undefined;
  readonly reporter: Reporter;
}

/** What a gate is asked before a retry: the call, and whether its run has paid for
 * anything yet (rule 23). */
export interface AdmitRequest extends Reporter {
  readonly started: boolean;
}

/** A gate refused an attempt or a retry: the call gives up with `reason`. */
export class Refusal {
  readonly reason: GiveUpReason;
  /** How long the attempt would have had to wait (the rate limiter's). */
  readonly waitMs: number | undefined;
  /** The gate's own error, if it gave one. */
  readonly cause: unknown;
  /** What the error says, when the reason's own words do not say it. */
  readonly words: string | undefined;
  constructor(reason: GiveUpReason, waitMs?: number, cause?: unknown, words?: string) {
    this.reason = reason;
    this.waitMs = waitMs;
    this.cause = cause;
    this.words = words;
  }
}

/**
 * One of the shared gates an attempt passes (docs/architecture.md, "The grant protocol"):
 * the breaker, the rate limiter, the admission. Each adapts a public interface (`Breaker`,
 * `Limiter`, `Admission`) to grants, and runs the user's code behind `report`: a gate
 * that throws never changes an outcome (rule 12).
 */
export interface Gate {
  /** A grant for the attempt now, or a wait for one (within `deadlineAt`). Throws (or
   * rejects with) a `Refusal`; a wait also rejects with the signal's reason. */
  enter(req: GateRequest): Grant | Promise<Grant>;
  /** Before a retry is sent: undefined admits it, a Refusal gives the call up (rule 1). */
  admit?(failure: Failure, r: AdmitRequest): Refusal | undefined;
  /** A retry this gate admitted will not be sent (an `onRetry` veto). */
  refund?(r: Reporter): void;
  /** False while the upstream shows overload to this gate: hedges stand down (rule 21). */
  calm?(r: Reporter): boolean;
  /** Set when `enter` always grants this, at once: the attempt's grants need no list. */
  readonly always?: Grant;
  /** A grant now, with no wait and no refusal, or undefined (then `enter` decides): the
   * lean path of `execute` asks this. */
  tryEnter?(req: GateRequest): Grant | undefined;
}

/** Runs a user-supplied gate's method; what it throws is reported and `fallback` stands in. */
function guard<T>(r: Reporter, hook: string, fn: () => T, fallback: T): T {
  try {
    return fn();
  } catch (error) {
    r.report(hook, error ?? new Error(`${hook} threw`));
    return fallback;
  }
}

const CIRCUIT_OPEN = new Refusal("circuit-open");
const STARTED = Object.freeze({ started: true });
const NOT_STARTED = Object.freeze({ started: false });
const BUDGET = new Refusal("budget");
type Heard = "onSuccess" | "onFailure" | "onNeutral";

/** The breaker: refuses attempts while open (outside the retry loop, rule 5), hears how
 * each attempt it let through ended; a failure that says nothing of the upstream (a
 * cancellation, a bad request) is neutral. */
export class BreakerGate implements Gate, Grant {
  readonly #breaker: Breaker;
  constructor(breaker: Breaker) {
    this.#breaker = breaker;
  }

  enter(req: GateRequest): Grant {
    // A breaker that throws lets the attempt go: a broken gate must not stop all traffic.
    const b = this.#breaker;
    if (!guard(req.reporter, "breaker.tryAcquire", () => b.tryAcquire(), true))
      throw this.#openFor(req.reporter);
    return this;
  }

  /** The refusal, with the wait until probes go through when the breaker says it. */
  #openFor(r: Reporter): Refusal {
    const b = this.#breaker;
    if (b.retryInMs === undefined) return CIRCUIT_OPEN;
    const ms = guard(r, "breaker.retryInMs", () => b.retryInMs!(), undefined);
    return typeof ms === "number" && ms > 0 ? new Refusal("circuit-open", ms) : CIRCUIT_OPEN;
  }

  admit(_f: Failure, r: Reporter): Refusal | undefined {
    const b = this.#breaker;
    return guard(r, "breaker.state", () => b.state, "closed") === "open"
      ? this.#openFor(r)
      : undefined;
  }

  calm(r: Reporter): boolean {
    const b = this.#breaker;
    return guard(r, "breaker.state", () => b.state, "open") === "closed";
  }

  end(how: AttemptEnd, _at: number, r: Reporter): void {
    const v: Heard =
      how.how === "ok"
        ? "onSuccess"
        : how.how === "failed" && KINDS[how.failure.kind].upstream
          ? "onFailure"
          : "onNeutral";
    const b = this.#breaker;
    guard(r, `breaker.${v}`, () => b[v](), undefined);
  }
}

/** The admission: every attempt's outcome is counted; a retry asks it for a token. */
export class AdmissionGate implements Gate, Grant {
  readonly #admission: Admission;
  readonly always: Grant = this;
  constructor(admission: Admission) {
    this.#admission = admission;
  }

  enter(): Grant {
    return this;
  }

  admit(f: Failure, r: AdmitRequest): Refusal | undefined {
    // An admission that throws refuses: when in doubt, protect the upstream.
    const a = this.#admission;
    // The admission hears what the call's run has paid for, not the call (rule 23).
    const ask = r.started ? STARTED : NOT_STARTED;
    return guard(r, "budget.tryAcquire", () => a.tryAcquire(f, ask), false) ? undefined : BUDGET;
  }

  refund(r: Reporter): void {
    const a = this.#admission;
    if (a.refund !== undefined) guard(r, "budget.refund", () => a.refund!(), undefined);
  }

  /** An adaptive admission refusing any share of retries is overload. */
  calm(r: Reporter): boolean {
    const a = this.#admission;
    return guard(r, "budget.rejectProbability", () => (a.rejectProbability ?? 0) === 0, false);
  }

  end(how: AttemptEnd, at: number, r: Reporter): void {
    // Every attempt comes here: written without closures, it costs the success path little.
    try {
      if (how.how === "ok") this.#admission.onSuccess(at);
      else if (how.how === "failed") this.#admission.onFailure?.(how.failure, at);
    } catch (error) {
      r.report(how.how === "ok" ? "budget.onSuccess" : "budget.onFailure", error);
    }
  }
}

const HELD =
  "a 429's Retry-After holds every call of this upstream past the longest wait (retryAfter.maxMs): refused before sending";

const NO_PERMIT: Permit = { settle: () => {}, cancel: () => {} };

/** The rate limiter's permit for one attempt: settled with what the attempt spent (a
 * failure with no usage keeps its input), or cancelled whole when it was never sent; a
 * 429 with a wait holds everyone sharing the limiter (rule 16). */
class PermitGrant implements Grant {
  readonly #limiter: Limiter;
  readonly #permit: Permit;
  readonly #holdCapMs: number;
  constructor(limiter: Limiter, permit: Permit, holdCapMs: number) {
    this.#limiter = limiter;
    this.#permit = permit;
    this.#holdCapMs = holdCapMs;
  }

  end(how: AttemptEnd, at: number, r: Reporter): void {
    const p = this.#permit;
    // Every attempt comes here: written without closures, it costs the success path little.
    try {
      if (how.how === "unsent") p.cancel();
      else if (how.how === "left") p.settle(how.usage);
      else if (how.how === "ok") p.settle(how.usage, { startedAt: at });
      else p.settle(how.usage ?? {}, { startedAt: at, failure: how.failure });
    } catch (error) {
      r.report(how.how === "unsent" ? "limiter.cancel" : "limiter.settle", error);
    }
    if (how.how !== "failed") return;
    const hint = how.failure.retryAfterMs;
    const limiter = this.#limiter;
    if (how.failure.kind !== "rate_limited" || hint === undefined) return;
    const ms = Math.min(hint, this.#holdCapMs);
    guard(r, "limiter.hold", () => limiter.hold(ms), undefined);
  }
}

/** The rate limiter: a permit before every attempt, at once or after a wait within the
 * deadline; refused with `rate-limit-wait` when the deadline cannot be met (rule 16). A
 * limiter that fails otherwise lets the call go: a broken gate must not stop all traffic. */
export class LimiterGate implements Gate {
  readonly #limiter: Limiter;
  /** The longest a 429's hint holds every call: the whole hint, unless the policy waits
   * only the cap past it (`retryAfter.beyondMax: "wait-max"`), when its retry goes then. */
  readonly #holdCapMs: number;
  constructor(limiter: Limiter, holdCapMs = Number.POSITIVE_INFINITY) {
    this.#limiter = limiter;
    this.#holdCapMs = holdCapMs;
  }

  /** A limiter holding everyone (a 429's wait) or one whose concurrency limit has cut. */
  calm(r: Reporter): boolean {
    const l = this.#limiter;
    return guard(r, "limiter.calm", () => l.calm !== false, false);
  }

  tryEnter(req: GateRequest): Grant | undefined {
    const limiter = this.#limiter;
    let now: Permit | undefined;
    try {
      now = limiter.tryAcquire(req.cost, req.group);
    } catch (error) {
      req.reporter.report("limiter.tryAcquire", error);
      now = NO_PERMIT;
    }
    return now === undefined ? undefined : new PermitGrant(limiter, now, this.#holdCapMs);
  }

  enter(req: GateRequest): Grant | Promise<Grant> {
    const limiter = this.#limiter;
    const take = () => limiter.tryAcquire(req.cost, req.group);
    const now = guard(req.reporter, "limiter.tryAcquire", take, NO_PERMIT);
    if (now !== undefined) return new PermitGrant(limiter, now, this.#holdCapMs);
    const held = guard(req.reporter, "limiter.heldForMs", () => limiter.heldForMs?.() ?? 0, 0);
    if (held > 0 && held > req.holdMs) throw new Refusal("rate-limit-wait", held, undefined, HELD);
    const wait = {
      deadlineAt: req.waitUntil,
      signal: req.cancel,
      priority: req.priority,
      group: req.group,
      started: req.started,
    };
    return Promise.resolve()
      .then(() => limiter.acquire(req.cost, wait))
      .then(
        (p) => new PermitGrant(limiter, p, this.#holdCapMs),
        (e: unknown) => {
          // A waiter dropped after waiting (the queue could not serve it in time) names no
          // wait still needed.
          if (isA(e, RateLimitWaitError))
            throw new Refusal("rate-limit-wait", e.waitMs > 0 ? e.waitMs : undefined, e);
          if (req.cancel?.aborted) throw e;
          req.reporter.report("limiter.acquire", e);
          return new PermitGrant(limiter, NO_PERMIT, this.#holdCapMs);
        },
      );
  }
}

/** A policy's gates, in the order an attempt passes them: the rate limiter (it may wait),
 * then the breaker, then the admission. */
export class Gates {
  readonly list: readonly Gate[];
  /** When no gate can refuse or wait: the grants every attempt holds, made once. */
  readonly fixed: readonly Grant[] | undefined;
  /** Whether every gate can grant at once without a wait (`always` or `tryEnter`). */
  readonly quick: boolean;

  constructor(list: readonly Gate[]) {
    this.list = list;
    this.fixed = list.every((g) => g.always !== undefined)
      ? Object.freeze(list.map((g) => g.always!))
      : undefined;
    this.quick = list.every((g) => g.always !== undefined || g.tryEnter !== undefined);
  }

  /** Every gate's grant at once, or undefined (and nothing held) when one would have the
   * attempt wait or refuse it: what the lean path asks (its gates are all `quick`), and a
   * hedge (rule 21), which never waits; a gate that can only `enter` is asked that way
   * (the breaker: at once, or a refusal). */
  tryEnter(req: GateRequest): readonly Grant[] | undefined {
    if (this.fixed !== undefined) return this.fixed;
    const grants: Grant[] = [];
    for (const g of this.list) {
      const grant = g.always ?? (g.tryEnter ? g.tryEnter(req) : enteredNow(g, req));
      if (grant === undefined) {
        for (const held of grants) held.end({ how: "unsent" }, 0, req.reporter);
        return undefined;
      }
      grants.push(grant);
    }
    return grants;
  }

  /** Asks every gate to admit a retry (rule 1): the first refusal, after the gates that
   * admitted it were refunded; undefined when all admit it. */
  admit(f: Failure, r: AdmitRequest): Refusal | undefined {
    const list = this.list;
    for (let i = 0; i < list.length; i++) {
      const refused = list[i]!.admit?.(f, r);
      if (refused === undefined) continue;
      for (let j = 0; j < i; j++) list[j]!.refund?.(r);
      return refused;
    }
    return undefined;
  }

  /** Whether every gate is calm: no overload shown (a hedge may go). */
  calm(r: Reporter): boolean {
    for (const g of this.list) if (g.calm !== undefined && !g.calm(r)) return false;
    return true;
  }

  /** A retry every gate admitted will not be sent. */
  refund(r: Reporter): void {
    for (const g of this.list) g.refund?.(r);
  }
}

/** A gate's grant if `enter` gives one at once; a refusal or a wait is none (a wait that
 * was begun is let go when it ends). */
function enteredNow(g: Gate, req: GateRequest): Grant | undefined {
  let got: Grant | Promise<Grant>;
  try {
    got = g.enter(req);
  } catch (e) {
    if (isA(e, Refusal)) return undefined;
    throw e;
  }
  if (!(got instanceof Promise)) return got;
  got.then(
    (late) => late.end({ how: "unsent" }, 0, req.reporter),
    () => {},
  );
  return undefined;
}

/** The gates of a policy with these parts. */
export function gatesOf(
  parts: {
    limiter: Limiter | undefined;
    breaker: Breaker | undefined;
    budget: Admission | undefined;
  },
  holdCapMs = Number.POSITIVE_INFINITY,
): Gates {
  const list: Gate[] = [];
  if (parts.limiter !== undefined) list.push(new LimiterGate(parts.limiter, holdCapMs));
  if (parts.breaker !== undefined) list.push(new BreakerGate(parts.breaker));
  if (parts.budget !== undefined) list.push(new AdmissionGate(parts.budget));
  return new Gates(list);
}
