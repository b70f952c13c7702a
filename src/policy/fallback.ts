import { BreakwaterError, failureOf, type GiveUpReason, reasonOf } from "../core/errors.ts";
import type { Failure, FailureKind } from "../core/failure.ts";
import { Ledger } from "../core/ledger.ts";
import { isA } from "../core/safe.ts";
import { opt, parseOptions, Validator } from "../core/validate.ts";
import { isRun, partsOf } from "../run/internal.ts";
import type { Run } from "../run/run.ts";
import type { AttemptContext, CallOptions } from "./call.ts";
import type { Policy } from "./policy.ts";
import type { GuardedStream } from "./stream.ts";
import type { OpenStream, StreamOptions } from "./stream-options.ts";

/** One upstream of a fallback chain: its own policy (its admission and breaker), and how
 * to call it. */
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

/** Options of a `fallback` chain. */
export interface FallbackOptions {
  /** The chain's deadline in ms, shared by every upstream: set once, when a call starts.
   * @default none (each upstream's own) */
  deadlineMs?: number;
  /** Attempts across the whole chain. @default the sum of the upstreams' maxAttempts */
  maxAttempts?: number;
  /** Whether a failure moves the call to the next upstream. @default `movesOn`: the
   * upstream cannot take it now (admission refused, breaker open, a Retry-After past the
   * cap, attempts or time used up on a transient failure, a spent quota) */
  when?: (
    failure: Failure | undefined,
    reason: GiveUpReason | undefined,
    error: unknown,
  ) => boolean;
}

/** What a call through the chain may carry. */
export interface ChainCallOptions {
  signal?: AbortSignal;
  run?: Run;
}

/** A chain of upstreams: each call goes to the first that can take it. */
export interface Fallback<T, C = unknown> {
  /** One logical call: the first upstream, then the next ones while `when` says so. */
  execute(options?: ChainCallOptions): Promise<T>;
  /** One streamed answer: an upstream is left only before it streamed anything. */
  stream(
    options?: ChainCallOptions & Omit<StreamOptions<C>, "signal" | "run">,
  ): AsyncIterable<C> & {
    readonly ledger: Ledger;
  };
}

/** Reasons that say "this upstream cannot serve the call now": the next one may. */
const MOVE_REASONS: ReadonlySet<GiveUpReason> = new Set([
  "budget",
  "rate-limit-wait",
  "circuit-open",
  "retry-after-too-long",
  "attempts-exhausted",
  "attempt-timeout",
]);
/** Failures a give-up for another reason still moves on from (a spent quota, an
 * overloaded upstream that said not to retry). */
const MOVE_KINDS: ReadonlySet<FailureKind> = new Set([
  "quota_exhausted",
  "rate_limited",
  "overloaded",
  "server_error",
  "timeout",
  "transport",
]);

/** The default `when`: the upstream cannot take the call now; a bad request, a refused
 * key, a cancellation or a deadline stay with the caller. */
export function movesOn(failure: Failure | undefined, reason: GiveUpReason | undefined): boolean {
  if (reason === "cancelled" || reason === "deadline" || reason?.startsWith("run-")) return false;
  if (reason !== undefined && MOVE_REASONS.has(reason)) return true;
  return failure !== undefined && MOVE_KINDS.has(failure.kind);
}

const isPolicy = (p: unknown) => typeof (p as Policy)?.execute === "function";

const SPEC = {
  deadlineMs: opt.ms(),
  maxAttempts: opt.int({ min: 1, default: Number.POSITIVE_INFINITY, infinite: true }),
  when: opt.fn<NonNullable<FallbackOptions["when"]>>(),
};

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

/** The upstreams to try in order after `failure` at index `i`. */
function nextIndex<T>(
  chain: readonly Upstream<T>[],
  i: number,
  failure: Failure | undefined,
): number {
  const wide = failure?.kind === "context_exceeded";
  for (let j = i + 1; j < chain.length; j++)
    if (Boolean(chain[j]!.forContextExceeded) === wide) return j;
  return -1;
}

/** @internal One call's share of a chain or pool: its ledger, its deadline, and what
 * each hop is handed. */
export interface Leg<C> {
  readonly ledger: Ledger;
  readonly deadlineAt: number;
  hop(u: Upstream<unknown, C>): CallOptions & { ledger: Ledger };
}

/** @internal Starts one call across upstreams: a ledger counted on the run, one deadline
 * and one attempt cap for every hop. */
export function beginLeg<C>(
  v: Validator,
  clock: Policy["options"]["clock"],
  deadlineMs: number,
  cap: number,
  call: ChainCallOptions | undefined,
): Leg<C> {
  if (call?.run !== undefined && !isRun(call.run)) v.fail("run", call.run, "a Run");
  const ledger = new Ledger(clock.now());
  if (call?.run) partsOf(call.run)!.limits.addCall(ledger);
  const deadlineAt = clock.now() + deadlineMs;
  return {
    ledger,
    deadlineAt,
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

class Chain<T, C> implements Fallback<T, C> {
  readonly #chain: readonly Upstream<T, C>[];
  readonly #cap: number;
  readonly #when: NonNullable<FallbackOptions["when"]>;
  readonly #deadlineMs: number;
  readonly #v: Validator;

  constructor(chain: readonly Upstream<T, C>[], o: Required<FallbackOptions>, v: Validator) {
    this.#chain = chain;
    this.#cap = o.maxAttempts;
    this.#when = o.when;
    this.#deadlineMs = o.deadlineMs;
    this.#v = v;
  }

  #begin(call: ChainCallOptions | undefined): Leg<C> {
    const clock = this.#chain[0]!.policy.options.clock;
    return beginLeg(this.#v, clock, this.#deadlineMs, this.#cap, call);
  }

  first(): number {
    return firstIndex(this.#chain);
  }

  /** After a hop failed: the next upstream's index, or -1 when the caller sees the error. */
  onward(i: number, error: unknown, ledger: Ledger): number {
    const f = failureOf(error);
    const moveOn = f?.kind === "context_exceeded" || this.#when(f, reasonOf(error), error);
    if (!moveOn || ledger.attempts.length >= this.#cap) return -1;
    return nextIndex(this.#chain, i, f);
  }

  async execute(call?: ChainCallOptions): Promise<T> {
    const leg = this.#begin(call);
    for (let i = firstIndex(this.#chain); ; ) {
      const u = this.#chain[i]!;
      const op =
        u.call ?? this.#v.fail(`upstreams[${i}].call`, undefined, "a function, to execute");
      try {
        return await u.policy.execute(op, leg.hop(u));
      } catch (error) {
        i = this.onward(i, error, leg.ledger);
        if (i < 0) throw error;
      }
    }
  }

  stream(call: ChainCallOptions & Omit<StreamOptions<C>, "signal" | "run"> = {}) {
    const leg = this.#begin(call);
    const { signal: _s, run: _r, ...rest } = call;
    const hop = (u: Upstream<T, C>) => ({ ...rest, ...leg.hop(u) });
    return streamChain(this, this.#chain, leg.ledger, hop, this.#v);
  }
}

/**
 * Moves a call to the next upstream (another model, region or provider) when the one it
 * is on cannot take it now (docs/architecture.md, rule 5): under one deadline, one attempt
 * cap and one ledger for the whole chain, the run's limits, and never after a stream showed
 * anything. Each upstream keeps its own policy, so its admission and breaker are its own:
 * a refused retry at the primary becomes the fallback's first attempt, not a failed call.
 */
export function fallback<T, C = unknown>(
  upstreams: readonly Upstream<T, C>[],
  options: FallbackOptions = {},
): Fallback<T, C> {
  const v = new Validator("fallback");
  const chain = checkUpstreams(v, upstreams) as readonly Upstream<T, C>[];
  const o = parseOptions(v, SPEC, options);
  const all = chain.reduce((n, u) => n + u.policy.options.maxAttempts, 0);
  const maxAttempts = o.maxAttempts === Number.POSITIVE_INFINITY ? all : o.maxAttempts;
  return new Chain(chain, { deadlineMs: o.deadlineMs, maxAttempts, when: o.when ?? movesOn }, v);
}

const firstIndex = (chain: readonly Upstream<unknown, unknown>[]) =>
  Math.max(
    0,
    chain.findIndex((u) => !u.forContextExceeded),
  );

/** @internal Where a stream across upstreams goes: the first upstream, and the next one
 * after a failure (-1: the caller sees it); either may wait (a pool's cooldown). */
export interface Hops {
  first(): number | Promise<number>;
  onward(i: number, error: unknown, ledger: Ledger): number | Promise<number>;
  /** The stream at upstream `i` ended well. */
  done?(i: number): void;
}

/** @internal A stream across upstreams: each upstream's GuardedStream in turn, left only
 * before anything reached the consumer. */
export function streamChain<T, C>(
  owner: Hops,
  chain: readonly Upstream<T, C>[],
  ledger: Ledger,
  hop: (u: Upstream<T, C>) => StreamOptions<C>,
  v: Validator,
): AsyncIterable<C> & { readonly ledger: Ledger } {
  async function* chunks(): AsyncGenerator<C> {
    for (let i = await owner.first(); ; ) {
      const u = chain[i]!;
      const open = u.open ?? v.fail(`upstreams[${i}].open`, undefined, "a function, to stream");
      const s: GuardedStream<C> = u.policy.stream(open, hop(u));
      let shown = false;
      try {
        for await (const chunk of s) {
          shown = true;
          yield chunk;
        }
        owner.done?.(i);
        return;
      } catch (error) {
        const interrupted =
          shown || (isA(error, BreakwaterError) && error.reason === "stream-interrupted");
        const next = interrupted ? -1 : await owner.onward(i, error, ledger);
        if (next < 0) throw error;
        i = next;
      }
    }
  }
  const it = chunks();
  return Object.assign(it, { ledger });
}
