import type { Clock } from "../core/clock.ts";
import { callDeadline } from "../core/deadline.ts";
import { BreakwaterError, failureOf, type GiveUpReason } from "../core/errors.ts";
import type { Failure, FailureKind } from "../core/failure.ts";
import { Ledger } from "../core/ledger.ts";
import { isA } from "../core/safe.ts";
import type { Validator } from "../core/validate.ts";
import { isRun, partsOf } from "../run/internal.ts";
import type { Run } from "../run/run.ts";
import type { AttemptContext, CallOptions } from "./call.ts";
import type { Policy } from "./policy.ts";
import type { GuardedStream } from "./stream.ts";
import type { OpenStream, StreamOptions } from "./stream-options.ts";

/** One upstream of a fallback chain or a pool: its own policy (its admission and breaker),
 * and how to call it. */
export interface Upstream<T, C = unknown> {
  /** Names it in the ledger: "openai:gpt-4o", "anthropic:sonnet", "eu-west". */
  readonly name: string;
  readonly policy: Policy;
  /** One attempt at this upstream (for `execute`). */
  readonly call?: (context: AttemptContext) => T | PromiseLike<T>;
  /** Opens one attempt's stream at this upstream (for `stream`). */
  readonly open?: OpenStream<C>;
  /** A larger-context model, tried only after a context-length failure. */
  readonly forContextExceeded?: boolean;
}

/** What a call through a chain or pool may carry. The last four are how a durable step
 * runs a chain as one leg (`durableStep`): they narrow the chain's own, never widen them. */
export interface ChainCallOptions {
  signal?: AbortSignal;
  run?: Run;
  /** Fewer attempts than the chain allows, across its upstreams. */
  maxAttempts?: number;
  /** An absolute deadline on the upstreams' clock, beside the chain's own. */
  deadlineAt?: number;
  /** Every hop's `deferAfterMs`: a wait longer than this ends the hop `deferred`; the call
   * moves on if another upstream can take it now, else ends `deferred` with the wait. */
  deferAfterMs?: number;
  /** A wait before the call that happened outside it (a durable engine's timer). */
  waited?: CallOptions["waited"];
}

/** What a durable step reads of a chain: its attempt cap and deadline, the clock its
 * upstreams share, and the longest Retry-After any of them honours. */
export interface ChainLimits {
  /** Attempts across the chain for a call with no deadline. */
  readonly maxAttempts: number;
  /** Attempts across the chain for a call with a deadline (its own, the chain's or its
   * run's): a backstop, as a policy's (rule 1). */
  readonly deadlineMaxAttempts: number;
  readonly deadlineMs: number;
  readonly clock: Clock;
  readonly retryAfterMaxMs: number;
}

/** A chain's attempt caps, without a deadline and with one: the given cap for both, else
 * `times` the sum of its upstreams' own. */
export function capsOf(
  ups: readonly { readonly policy: { readonly options: ChainLimitsOf } }[],
  given: number,
  times = 1,
): { maxAttempts: number; deadlineMaxAttempts: number } {
  if (given !== Number.POSITIVE_INFINITY) return { maxAttempts: given, deadlineMaxAttempts: given };
  const sum = (k: keyof ChainLimitsOf) => times * ups.reduce((n, u) => n + u.policy.options[k], 0);
  return { maxAttempts: sum("maxAttempts"), deadlineMaxAttempts: sum("deadlineMaxAttempts") };
}
type ChainLimitsOf = Pick<ChainLimits, "maxAttempts" | "deadlineMaxAttempts">;

/** Decides whether a failure moves a call on to the next upstream. */
export type MoveOn = (
  failure: Failure | undefined,
  reason: GiveUpReason | undefined,
  error: unknown,
) => boolean;

/** A chain of upstreams (a `fallback` or a `pool`): each call goes to the one its strategy
 * picks, and on to the next while the failure says so. */
export interface Fallback<T, C = unknown> {
  /** The chain's limits, as a durable step reads them. */
  readonly limits: ChainLimits;
  /** One logical call: the first upstream, then the next ones while `when` says so. */
  execute(options?: ChainCallOptions): Promise<T>;
  /** One streamed answer: an upstream is left only before it streamed anything. */
  stream(
    options?: ChainCallOptions & Omit<StreamOptions<C>, "signal" | "run">,
  ): AsyncIterable<C> & {
    readonly ledger: Ledger;
  };
}

/** @internal One call's share of a chain or pool: its ledger, its deadline, the run's,
 * and what each hop is handed. */
export interface Leg<C> {
  readonly ledger: Ledger;
  /** The chain's deadline for this call (Infinity: none). */
  readonly deadlineAt: number;
  /** Attempts this call may make across the chain. */
  readonly cap: number;
  /** When this call must be done, its run's share included (rule 6). */
  deadline(now: number): number;
  readonly signal: AbortSignal | undefined;
  /** Upstreams this call left after a failure that moved it on. */
  readonly tried: Set<number>;
  /** A wait the strategy made before the next hop (a pool's for a recovery): the hop's
   * call tells it and books it on its first attempt. */
  waited: CallOptions["waited"];
  /** Every hop's `deferAfterMs` (a durable step's leg). */
  readonly deferAfterMs: number | undefined;
  hop(u: Upstream<unknown, C>): CallOptions & { ledger: Ledger };
}

/**
 * How a router chooses (undici's pool picks its dispatcher through one hook the same way):
 * the upstream for a call's first hop and, after one failed in a way that moves the call
 * on, the next. `-1`: none is left (the caller sees the last error). Either may wait.
 */
export interface Strategy<C> {
  first(leg: Leg<C>): number | Promise<number>;
  next(
    i: number,
    failure: Failure | undefined,
    leg: Leg<C>,
    last: unknown,
  ): number | Promise<number>;
  /** Whether a failure moves the call on; the upstream `i` is charged for it. */
  moves(i: number, error: unknown): boolean;
  /** Whether a failure at upstream `i` is retried there (else its policy gives up, and
   * the call moves on): wait if short, switch if long. @default every retryable one */
  retryHere?(i: number, failure: Failure, error: unknown, leg: Leg<C>): boolean;
  /** The longest a call at upstream `i` waits at its gates (the rate limiter) before it
   * is refused and moves on: short when another upstream has room. @default the policy's */
  maxWaitMs?(i: number, leg: Leg<C>): number | undefined;
  /** The call succeeded at upstream `i`. */
  succeeded?(i: number): void;
}

/** How long a call waits at an upstream's gates while another upstream has room: past it
 * the call is refused there (`rate-limit-wait`) and moves on. About what a healthy
 * upstream takes to begin an answer: a wait longer than that loses to switching. */
export const SWITCH_AFTER_MS = 1_000;

/** The failures that move a call on at once when another upstream has room (wait if
 * short, switch if long): a rate limit or an overload (the upstream refuses a share of
 * calls; its Retry-After, or the backoff, is a wait the next one does not ask for) and a
 * timeout (a slow failure: a second try costs the same time again). */
export const SWITCH_KINDS: ReadonlySet<FailureKind> = new Set([
  "rate_limited",
  "overloaded",
  "timeout",
]);

/** An upstream's room for a call now: its rate limiter's headroom (0 while a 429's wait
 * holds it); none (-1) while its breaker is open. */
export function roomOf(u: Upstream<unknown, unknown>): number {
  const { limiter, breaker } = u.policy.options;
  if (breaker?.state === "open") return -1;
  try {
    return limiter?.headroom() ?? 1;
  } catch {
    return 1; // a limiter that throws does not stop traffic (rule 12)
  }
}

const isPolicy = (p: unknown) => typeof (p as Policy)?.execute === "function";

/** @internal Checks the upstreams of a chain or a pool: names, policies, one clock. */
export function checkUpstreams(v: Validator, upstreams: unknown): readonly Upstream<unknown>[] {
  if (!Array.isArray(upstreams) || upstreams.length === 0)
    v.fail("upstreams", upstreams, "a non-empty array of { name, policy, call | open }");
  (upstreams as unknown[]).forEach((u, i) => {
    const x = v.object(`upstreams[${i}]`, u);
    v.str(`upstreams[${i}].name`, x.name);
    if (!isPolicy(x.policy))
      v.fail(`upstreams[${i}].policy`, x.policy, "a Policy (policy({ ... }))");
    if (x.call === undefined && x.open === undefined)
      v.fail(`upstreams[${i}].call`, undefined, "a function (or `open`, for streams)");
  });
  const clocks = new Set((upstreams as Upstream<unknown>[]).map((u) => u.policy.options.clock));
  if (clocks.size > 1)
    v.fail(
      "upstreams",
      "policies on different clocks",
      "policies sharing one clock (one deadline)",
    );
  return upstreams as Upstream<unknown>[];
}

/**
 * The one loop of every chain (docs/architecture.md, "The router"): a call goes to the
 * upstream its strategy picks, and on to the next after a failure that moves it on, under
 * one deadline, one attempt cap and one ledger counted on the run, and never after a
 * stream showed anything (rule 5).
 */
export class Router<T, C> implements Fallback<T, C> {
  readonly #ups: readonly Upstream<T, C>[];
  readonly #strategy: Strategy<C>;
  readonly #deadlineMs: number;
  readonly #cap: number;
  readonly #deadlineCap: number;
  readonly #v: Validator;
  readonly limits: ChainLimits;

  constructor(
    ups: readonly Upstream<T, C>[],
    strategy: Strategy<C>,
    limits: { deadlineMs: number; maxAttempts: number; deadlineMaxAttempts: number },
    v: Validator,
  ) {
    this.#ups = ups;
    this.#strategy = strategy;
    this.#deadlineMs = limits.deadlineMs;
    this.#cap = limits.maxAttempts;
    this.#deadlineCap = limits.deadlineMaxAttempts;
    this.#v = v;
    const rules = ups.map((u) => u.policy.options);
    this.limits = Object.freeze({
      ...limits,
      clock: rules[0]!.clock,
      retryAfterMaxMs: Math.max(...rules.map((r) => r.retryAfterMaxMs)),
    });
  }

  async execute(call?: ChainCallOptions): Promise<T> {
    const leg = this.#leg(call);
    for (let i = await this.#strategy.first(leg); ; ) {
      const u = this.#ups[i]!;
      const op =
        u.call ?? this.#v.fail(`upstreams[${i}].call`, undefined, "a function, to execute");
      try {
        const value = await u.policy.execute(op, this.#hop(leg, i));
        this.#strategy.succeeded?.(i);
        return value;
      } catch (error) {
        i = await this.#onward(i, error, leg);
        if (i < 0) throw error;
      }
    }
  }

  stream(call: ChainCallOptions & Omit<StreamOptions<C>, "signal" | "run"> = {}) {
    const leg = this.#leg(call);
    const { signal: _s, run: _r, ...rest } = call;
    const it = this.#chunks(leg, rest);
    return Object.assign(it, { ledger: leg.ledger });
  }

  /** Each upstream's GuardedStream in turn, left only before anything reached the consumer. */
  async *#chunks(leg: Leg<C>, rest: Omit<StreamOptions<C>, "signal" | "run">): AsyncGenerator<C> {
    for (let i = await this.#strategy.first(leg); ; ) {
      const u = this.#ups[i]!;
      const open =
        u.open ?? this.#v.fail(`upstreams[${i}].open`, undefined, "a function, to stream");
      const s: GuardedStream<C> = u.policy.stream(open, { ...rest, ...this.#hop(leg, i) });
      let shown = false;
      try {
        for await (const chunk of s) {
          shown = true;
          yield chunk;
        }
        this.#strategy.succeeded?.(i);
        return;
      } catch (error) {
        const interrupted =
          shown || (isA(error, BreakwaterError) && error.reason === "stream-interrupted");
        const next = interrupted ? -1 : await this.#onward(i, error, leg);
        if (next < 0) throw error;
        i = next;
      }
    }
  }

  /** What hop `i` is handed: the leg's limits, and the strategy's say on retrying and
   * waiting there. */
  #hop(leg: Leg<C>, i: number): CallOptions & { ledger: Ledger } {
    const hop = leg.hop(this.#ups[i]!);
    const s = this.#strategy;
    const wait = s.maxWaitMs?.(i, leg);
    if (wait !== undefined) hop.maxWaitMs = wait;
    if (leg.deferAfterMs !== undefined) hop.deferAfterMs = leg.deferAfterMs;
    if (leg.waited !== undefined) {
      hop.waited = leg.waited;
      leg.waited = undefined;
    }
    const here = s.retryHere;
    if (here !== undefined) hop.retryIf = (f, error) => here.call(s, i, f, error, leg);
    return hop;
  }

  /** After a hop failed: the next upstream's index, or -1 when the caller sees the error. */
  #onward(i: number, error: unknown, leg: Leg<C>): number | Promise<number> {
    if (!this.#strategy.moves(i, error) || leg.ledger.attempts.length >= leg.cap) return -1;
    // No time left for another upstream: the caller sees this one's error.
    const now = this.#ups[0]!.policy.options.clock.now();
    if (leg.deadline(now) <= now) return -1;
    leg.tried.add(i);
    return this.#strategy.next(i, failureOf(error), leg, error);
  }

  /** Starts one call across upstreams: a ledger counted on the run, one deadline and one
   * attempt cap for every hop. */
  #leg(call: ChainCallOptions | undefined): Leg<C> {
    const v = this.#v;
    if (call?.run !== undefined && !isRun(call.run)) v.fail("run", call.run, "a Run");
    const clock = this.#ups[0]!.policy.options.clock;
    const ledger = new Ledger(clock.now());
    const run = call?.run === undefined ? undefined : partsOf(call.run)!.limits;
    run?.addCall(ledger);
    // The chain's deadline, and the run's as it stands at each hop, from the one place
    // every call's comes from (rule 6).
    const startedAt = clock.now();
    const given = call?.deadlineAt ?? Number.POSITIVE_INFINITY;
    const within = (runAllows: number) =>
      Math.min(given, callDeadline(startedAt, this.#deadlineMs, runAllows).at);
    const deadlineAt = within(Number.POSITIVE_INFINITY);
    const bounded = within(run?.callDeadline(startedAt) ?? Number.POSITIVE_INFINITY);
    const own = bounded === Number.POSITIVE_INFINITY ? this.#cap : this.#deadlineCap;
    const cap = Math.min(own, call?.maxAttempts ?? Number.POSITIVE_INFINITY);
    return {
      ledger,
      deadlineAt,
      cap,
      signal: call?.signal,
      tried: new Set(),
      waited: call?.waited,
      deferAfterMs: call?.deferAfterMs,
      deadline: (now) => within(run?.callDeadline(now) ?? Number.POSITIVE_INFINITY),
      hop: (u) => ({
        ...(call?.signal && { signal: call.signal }),
        ...(call?.run && { run: call.run }),
        ...(deadlineAt !== Number.POSITIVE_INFINITY && { deadlineAt }),
        maxAttempts: Math.max(1, cap - ledger.attempts.length),
        ledger,
        upstream: u.name,
      }),
    };
  }
}
