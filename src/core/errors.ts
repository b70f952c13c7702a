import type { TimeoutCause } from "./deadline.ts";
import type { Failure } from "./failure.ts";
import type { Ledger } from "./ledger.ts";
import { get, isA, isObj } from "./safe.ts";
import type { Usage } from "./usage.ts";

interface ReasonFacts {
  /** True: the policy stopped a call that might otherwise have been retried, and throws a
   * BreakwaterError. False: the provider is why, and its own error is thrown, tagged
   * (docs/architecture.md, rule 8). */
  readonly own: boolean;
  readonly message?: string;
}

/** The one table of reasons a call ends without a value. */
const REASONS = {
  deadline: { own: true, message: "the call's deadline leaves no time for another attempt" },
  budget: {
    own: true,
    message: "the retry budget is empty: retries are refused to protect the upstream",
  },
  "retry-after-too-long": {
    own: true,
    message: "the server asked to wait longer than allowed (backpressure)",
  },
  "circuit-open": { own: true, message: "the circuit breaker is open: failing fast" },
  "stream-interrupted": {
    own: true,
    message: "the stream failed after output reached the consumer; not replayed",
  },
  "attempt-timeout": { own: true, message: "every attempt ran out of time" },
  "rate-limit-wait": {
    own: true,
    message: "the rate limits would hold the call past its deadline: refused before sending",
  },
  "pool-cooldown": {
    own: true,
    message: "every deployment of the pool is cooling down past the call's deadline",
  },
  "run-attempts": { own: true, message: "the run has used all its attempts" },
  "run-deadline": { own: true, message: "the run's deadline has passed" },
  "run-tokens": { own: true, message: "the run has spent its token allowance" },
  "run-retry-share": {
    own: true,
    message: "retries have spent more than their share of the run's tokens",
  },
  "run-tool-failures": { own: true, message: "the run hit its cap on tool failures" },
  deferred: {
    own: true,
    message:
      "the next attempt's wait is longer than this process holds one (deferAfterMs): the durable engine that called waits it in its own timer and calls again",
  },
  "outcome-unknown": {
    own: true,
    message:
      "the request changes state on the server and failed after it may have arrived: not sent again (check the state, or mark the request safe)",
  },
  "not-retryable": { own: false },
  "attempts-exhausted": { own: false },
  cancelled: { own: false },
  vetoed: { own: false },
} as const satisfies Record<string, ReasonFacts>;

/** Why a call ended without a value. */
export type GiveUpReason = keyof typeof REASONS;

export const GIVE_UP_REASONS = Object.keys(REASONS) as readonly GiveUpReason[];

/** True for the reasons the policy raises as a BreakwaterError. */
export const isOwnReason = (reason: GiveUpReason): boolean => REASONS[reason].own;

/** Our own timeout fired: the attempt was cut, which says nothing about the server. */
export class AttemptTimeoutError extends Error {
  override name = "AttemptTimeoutError";
  readonly by: TimeoutCause;
  readonly afterMs: number;

  constructor(by: TimeoutCause, afterMs: number) {
    super(`${by} timeout after ${Math.round(afterMs)} ms`);
    this.by = by;
    this.afterMs = afterMs;
  }
}

/** A tool call as far as a broken stream got: `complete` when the stream moved past it. */
export interface PartialToolCall {
  readonly id?: string;
  readonly name?: string;
  /** The arguments as streamed (JSON text; cut mid-way when not complete). */
  readonly arguments: string;
  readonly complete: boolean;
}

/** What a stream had produced when it broke, in one shape for every provider. */
export interface PartialAnswer {
  readonly text: string;
  readonly toolCalls: readonly PartialToolCall[];
  /** The provider's finish reason, when the stream got that far. */
  readonly finish: string | undefined;
}

/** What a stream had delivered when it broke. */
export interface PartialResult<T = unknown> {
  /** Chunks the consumer already received: a stream's chunks under `policy.stream`; under
   * the fetch layer (the openai, anthropic and google adapters, `guardedFetch`), the
   * server-sent events, each with its `raw` text, `event`, `data` and `json`. */
  readonly chunks: readonly T[];
  readonly usage: Usage | undefined;
  /** The answer so far, read from the chunks by the adapter (`answer` option). */
  readonly answer?: PartialAnswer | undefined;
}

export interface BreakwaterErrorInit {
  cause?: unknown;
  ledger?: Ledger;
  failure?: Failure;
  retryAfterMs?: number;
  partial?: PartialResult;
}

const messageOf = (reason: GiveUpReason): string =>
  (REASONS[reason] as ReasonFacts | undefined)?.message ?? reason;

/** An error breakwater raised itself: the policy stopped the call. */
export class BreakwaterError extends Error {
  override name = "BreakwaterError";
  readonly reason: GiveUpReason;
  readonly ledger: Ledger | undefined;
  readonly failure: Failure | undefined;
  /** The server's hint, when backpressure was why we stopped. */
  readonly retryAfterMs: number | undefined;
  /** What a stream delivered before it broke. */
  readonly partial: PartialResult | undefined;

  constructor(reason: GiveUpReason, init: BreakwaterErrorInit = {}, message?: string) {
    // Whole milliseconds: a wait is said as a person reads it, and kept as it is said.
    const wait = init.retryAfterMs === undefined ? undefined : Math.ceil(init.retryAfterMs);
    const hint = wait === undefined ? "" : ` (retry after ${wait} ms)`;
    super(`${message ?? messageOf(reason)}${hint}`, { cause: init.cause });
    this.reason = reason;
    this.ledger = init.ledger;
    this.failure = init.failure;
    this.retryAfterMs = wait;
    this.partial = init.partial;
  }
}

/** Whether `e` is a BreakwaterError (the policy stopped a call it could have retried). */
export const isBreakwaterError = (e: unknown): e is BreakwaterError => isA(e, BreakwaterError);

/**
 * A request that cannot succeed, caught before it is sent (nothing spent): a transcript no
 * provider accepts (a tool result without its call, a call left without its result), or an
 * output allowance that leaves no room for the prompt in the model's context window.
 */
export class RequestCheckError extends Error {
  override name = "BreakwaterRequestCheckError";
  readonly kind: "invalid_request" | "context_exceeded";
  readonly problem: "transcript" | "max-output";

  constructor(problem: "transcript" | "max-output", message: string) {
    super(message);
    this.problem = problem;
    this.kind = problem === "transcript" ? "invalid_request" : "context_exceeded";
  }
}

/** What was wrong with an answer the provider gave: cut at the token limit, not JSON, not
 * its schema, a refusal, empty, or a check of yours that said no. */
export type OutputProblem = "truncated" | "parse" | "schema" | "refusal" | "empty" | "check";

/** One issue a schema found (Standard Schema's shape). */
export interface OutputIssue {
  readonly message: string;
  readonly path?: readonly unknown[] | undefined;
}

/**
 * A successful answer that is not a good one (docs/architecture.md, rule 11). A truncated
 * answer (`kind` "truncated") is never retried: the same limit cuts it the same way; an
 * invalid one ("invalid_output") is retried within the call's attempts, and the last one's
 * error is what the caller sees.
 */
export class OutputError extends Error {
  override name = "BreakwaterOutputError";
  readonly kind: "truncated" | "invalid_output";
  readonly problem: OutputProblem;
  /** The answer's text as it came (for a truncated answer, the text so far). */
  readonly text: string | undefined;
  readonly issues: readonly OutputIssue[] | undefined;

  constructor(
    problem: OutputProblem,
    message: string,
    more: { text?: string; issues?: readonly OutputIssue[]; cause?: unknown } = {},
  ) {
    super(message, more.cause === undefined ? undefined : { cause: more.cause });
    this.problem = problem;
    this.kind = problem === "truncated" ? "truncated" : "invalid_output";
    this.text = more.text;
    this.issues = more.issues;
  }
}

interface Outcome {
  reason: GiveUpReason;
  ledger: Ledger;
  failure: Failure | undefined;
  partial?: PartialResult | undefined;
}
const outcomes = new WeakMap<object, Outcome>();

/** Attaches the give-up reason and ledger to a foreign error the policy rethrows as it is. */
export function tagError(
  error: unknown,
  reason: GiveUpReason,
  ledger: Ledger,
  failure?: Failure,
  partial?: PartialResult,
): void {
  if (error !== null && (typeof error === "object" || typeof error === "function")) {
    outcomes.set(error, { reason, ledger, failure, partial });
  }
}

/**
 * The outcome of the call that threw `error`: its own, or that of what it carries. An SDK
 * may rebuild its error from the answer breakwater handed it (the outcome is then on the
 * answer's `headers`) or wrap breakwater's refusal (`cause`).
 */
function outcomeOf(error: unknown): Outcome | BreakwaterError | undefined {
  const seen = new Set<unknown>();
  for (let e = error; isObj(e) && !seen.has(e) && seen.size < 8; e = carried(e)) {
    seen.add(e);
    if (isA(e, BreakwaterError)) return e;
    const own = outcomes.get(e);
    if (own !== undefined) return own;
    const headers = get(e, "headers");
    const viaHeaders = isObj(headers) ? outcomes.get(headers) : undefined;
    if (viaHeaders !== undefined) return viaHeaders;
  }
  return undefined;
}

/** The wait named on the BreakwaterError that `error` is or carries (an adapter may wrap
 * it in its SDK's class): the backpressure's hint, or a deferred retry's wait. */
export function waitOf(error: unknown): number | undefined {
  const o = outcomeOf(error);
  return isA(o, BreakwaterError) ? o.retryAfterMs : undefined;
}

/** The ledger of the call that threw `error` (a BreakwaterError or a provider's own). */
export function ledgerOf(error: unknown): Ledger | undefined {
  return outcomeOf(error)?.ledger;
}

/** Why the policy gave up on the call that threw `error`. A request refused before it was
 * sent (RequestCheckError) is `not-retryable`: it would fail the same way again. An error
 * a durable engine revived from its record (JSON: no class, no tag) says it in its own
 * `breakwaterReason` (`markReason`). */
export function reasonOf(error: unknown): GiveUpReason | undefined {
  return (
    outcomeOf(error)?.reason ?? (checkOf(error) ? "not-retryable" : undefined) ?? markedOf(error)
  );
}

/** Writes the reason on the error itself, as an own field that survives its journal's JSON
 * (an engine that records errors as data: DBOS). */
export function markReason(error: unknown): void {
  const reason = reasonOf(error);
  if (reason === undefined || !isObj(error) || Object.isFrozen(error)) return;
  try {
    Object.defineProperty(error, "breakwaterReason", {
      value: reason,
      enumerable: true,
      configurable: true,
    });
  } catch {} // a Proxy that refuses: the reason stays in memory only
}

const markedOf = (error: unknown): GiveUpReason | undefined => {
  const r = get(error, "breakwaterReason");
  return typeof r === "string" && Object.hasOwn(REASONS, r) ? (r as GiveUpReason) : undefined;
};

/** What an error carries: its `cause`, or the AI SDK's RetryError's last try. */
const carried = (e: object): unknown => get(e, "cause") ?? get(e, "lastError");

/** The RequestCheckError `error` is or carries. */
function checkOf(error: unknown): RequestCheckError | undefined {
  for (let e = error, i = 0; isObj(e) && i < 8; e = carried(e), i++)
    if (isA(e, RequestCheckError)) return e;
  return undefined;
}

/** The failure classification of the last attempt of the call that threw `error`. */
export function failureOf(error: unknown): Failure | undefined {
  const own = outcomeOf(error)?.failure;
  const check = own === undefined ? checkOf(error) : undefined;
  return check ? { kind: check.kind, retryable: false, code: check.problem } : own;
}

/** What a stream had delivered when it broke (chunks, usage, and the answer so far when the
 * adapter reads one), for the error it ended with: breakwater's or the SDK's own. */
export function partialOf(error: unknown): PartialResult | undefined {
  return outcomeOf(error)?.partial;
}
