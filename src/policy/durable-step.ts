import { callDeadline } from "../core/deadline.ts";
import { failureOf, type GiveUpReason, ledgerOf } from "../core/errors.ts";
import { handoff } from "../core/handoff.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import type { AttemptContext, CallOptions } from "./call.ts";
import type { WaitCause } from "./observer.ts";
import type { Operation, Policy } from "./policy.ts";
import type { ChainCallOptions, ChainLimits, Fallback } from "./router.ts";

/**
 * Where a durable step stands between two of its legs: what the engine keeps for it (it
 * journals the leg's outcome) and hands to the next leg. Plain JSON.
 */
export interface StepState {
  /** Attempts sent by the step's legs so far: the next leg may send what is left. */
  readonly spent: number;
  /** The step's deadline on the policy's clock (epoch ms with `systemClock`); null: none. */
  readonly deadlineAt: number | null;
  /** Legs run so far. */
  readonly legs: number;
  /** The wait the engine performs before the next leg, and what asked for it. */
  readonly waitMs: number;
  readonly why: WaitCause;
}

/** How one leg of a durable step ended: with the value, or with a wait for the engine to
 * perform before it runs the next leg (from `state`). A final failure is thrown. */
export type StepOutcome<T> =
  | { readonly ok: true; readonly value: T }
  | {
      readonly ok: false;
      readonly waitMs: number;
      readonly reason: GiveUpReason;
      readonly state: StepState;
    };

/** What `durableStep` takes: a call's options (but the ones the step sets itself), the
 * state the last leg returned, and how long a wait may be held in this process. */
export interface DurableStepOptions
  extends Omit<CallOptions, "maxAttempts" | "deferAfterMs" | "deadlineAt" | "waited"> {
  /** The state the step's last leg returned; absent for the first leg. */
  state?: StepState | undefined;
  /** The longest wait slept in this process between two attempts; a longer one (a
   * Retry-After of 20 s, an open breaker's cool-off) ends the leg, for the engine to wait
   * in its own timer, where a process death cannot lose it and nothing is held meanwhile.
   * @default 5000 */
  holdMs?: number | undefined;
}

const isState = (s: unknown): boolean => {
  const x = s as Partial<StepState> | null;
  return (
    x !== null &&
    typeof x === "object" &&
    Number.isInteger(x.spent) &&
    (x.spent as number) >= 0 &&
    (x.deadlineAt === null || typeof x.deadlineAt === "number")
  );
};

const SPEC = {
  state: opt.any<StepState>(isState, "the state the step's last leg returned"),
  holdMs: opt.num({ min: 0, default: 5_000 }),
};
const V = new Validator("durableStep");

/** What a gate's or the backoff's give-up waited for, as `onWait` names it. */
function causeOf(reason: GiveUpReason, error: unknown): WaitCause {
  if (reason === "rate-limit-wait") return "rate-limit";
  if (reason === "circuit-open") return "cooldown";
  return failureOf(error)?.retryAfterMs === undefined ? "backoff" : "retry-after";
}

/** A policy with the operation it runs, or a chain (a `fallback` or a `pool`), whose
 * upstreams hold their calls. */
export type StepTarget<T> = Policy | Fallback<T>;

const isChain = <T>(t: StepTarget<T>): t is Fallback<T> =>
  (t as Partial<Fallback<T>>).limits !== undefined;

/** What the step reads of its target: the attempt cap, the deadline, the clock, the cap
 * on a Retry-After. */
const limitsOf = <T>(t: StepTarget<T>): ChainLimits => (isChain(t) ? t.limits : t.options);

/**
 * One leg of a durable step (docs/architecture.md, rule 22): `policy.execute` (or a chain's
 * `execute`) as a durable engine's step runs it. Short waits are slept here as usual; a
 * longer one ends the leg with the wait, which the engine performs in its own timer before
 * the next leg, handed `state`: the step's attempts and deadline go on across legs, so the
 * engine and breakwater never multiply. A chain moves on at once where it can (a long
 * wait at one upstream is a switch while another has room), and ends the leg with a wait
 * only where none can take the call. A final failure (a 400, attempts or admission spent,
 * the deadline, a Retry-After past the cap) is thrown as `execute` throws it: the engine
 * must not retry it. Each engine's adapter maps the two to its own signals.
 */
export async function durableStep<T>(
  target: StepTarget<T>,
  operation: Operation<T> | undefined,
  options: DurableStepOptions = {},
): Promise<StepOutcome<T>> {
  const { state, holdMs, ...given } = options;
  const o = parseOptions(V, SPEC, { state, holdMs });
  const limits = limitsOf(target);
  const clock = limits.clock;
  const prior = o.state;
  const deadlineAt = prior
    ? (prior.deadlineAt ?? Number.POSITIVE_INFINITY)
    : callDeadline(clock.now(), given.deadlineMs ?? limits.deadlineMs, Number.POSITIVE_INFINITY).at;
  const spent = prior?.spent ?? 0;
  // With a deadline (the step's or its run's) the attempt cap is a backstop (rule 1).
  const runEnds = given.run?.deadline ?? Number.POSITIVE_INFINITY;
  const bounded = Math.min(deadlineAt, runEnds) !== Number.POSITIVE_INFINITY;
  const cap = bounded ? limits.deadlineMaxAttempts : limits.maxAttempts;
  const step = {
    maxAttempts: Math.max(1, cap - spent),
    deferAfterMs: o.holdMs,
    ...(deadlineAt !== Number.POSITIVE_INFINITY && { deadlineAt }),
    ...(prior && { waited: { ms: prior.waitMs, why: prior.why } }),
  };
  try {
    return { ok: true, value: await send(target, operation, given, step) };
  } catch (error) {
    const h = handoff(error, clock.now(), deadlineAt, limits.retryAfterMaxMs);
    if (h.waitMs === undefined || h.reason === undefined) throw error;
    const sent = ledgerOf(error)?.attempts.length ?? 0;
    const next: StepState = {
      spent: spent + sent,
      deadlineAt: deadlineAt === Number.POSITIVE_INFINITY ? null : deadlineAt,
      legs: (prior?.legs ?? 0) + 1,
      waitMs: h.waitMs,
      why: causeOf(h.reason, error),
    };
    return { ok: false, waitMs: h.waitMs, reason: h.reason, state: next };
  }
}

/** The leg's one call: the policy's `execute` of the operation, or the chain's. */
function send<T>(
  target: StepTarget<T>,
  operation: Operation<T> | undefined,
  given: Omit<DurableStepOptions, "state" | "holdMs">,
  step: ChainCallOptions & Pick<CallOptions, "maxAttempts" | "deferAfterMs" | "deadlineAt">,
): Promise<T> {
  if (isChain(target)) {
    const { signal, run } = given;
    return target.execute({ ...step, ...(signal && { signal }), ...(run && { run }) });
  }
  if (operation === undefined) return V.fail("operation", operation, "a function, for a policy");
  return target.execute(operation, { ...given, ...step });
}

/** What a durable step's operation is handed: the attempt's context, and a key named by
 * the engine's step identity (the same across the step's retries, legs and replays). */
export interface StepContext extends AttemptContext {
  /** For the provider's `Idempotency-Key` and the step's side effects. */
  readonly idempotencyKey: string;
  /** The same key, under the name `guardTool` reads: a guarded tool called with this
   * context keys its effect `${runId}:${tool}:${digest of the arguments}`. */
  readonly runId: string;
}

/** The operation's context for the step keyed `key`: the attempt's, read through. */
export function stepContext(c: AttemptContext, key: string): StepContext {
  return {
    get attempt() {
      return c.attempt;
    },
    get signal() {
      return c.signal;
    },
    get deadline() {
      return c.deadline;
    },
    get remainingMs() {
      return c.remainingMs;
    },
    answeredBy: (model: string) => c.answeredBy(model),
    answering: () => c.answering(),
    idempotencyKey: key,
    runId: key,
  };
}
