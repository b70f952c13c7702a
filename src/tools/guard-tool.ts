import { randomUUID } from "node:crypto";
import type { Breaker, CircuitBreakerOptions } from "../core/breaker.ts";
import type { Admission, RetryBudgetOptions } from "../core/budget.ts";
import { type Effect, provesNothingRan } from "../core/effects.ts";
import { BreakwaterError, failureOf, reasonOf } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import { scrubError } from "../core/redact.ts";
import { isA } from "../core/safe.ts";
import { opt, parseOptions, type Rule, Validator } from "../core/validate.ts";
import type { PolicyOptions } from "../policy/options.ts";
import { policy as makePolicy, type Policy } from "../policy/policy.ts";
import { journaled, partsOf } from "../run/internal.ts";
import type { Run } from "../run/run.ts";
import type { ToolMemo } from "../run/tool-memo.ts";
import { argsDigest } from "./canonical.ts";
import {
  envelopeFor,
  isArgumentError,
  isTransientCode,
  ToolError,
  type ToolErrorEnvelope,
  transientFailure,
} from "./envelope.ts";

/** What running a tool twice does. */
export type { Effect } from "../core/effects.ts";

/** What the guarded tool function receives besides its arguments. */
export interface ToolCallContext {
  /** Stable across this guard's retries (and, within a run, across identical calls). */
  readonly idempotencyKey: string;
  readonly signal: AbortSignal;
  /** 1 for the first attempt. */
  readonly attempt: number;
  readonly toolCallId?: string;
}

/** The second argument of the guarded function. The AI SDK's execute options fit (their
 * other fields are passed through to the tool's context). */
export interface GuardedCallOptions {
  signal?: AbortSignal;
  /** The AI SDK's name for the signal. */
  abortSignal?: AbortSignal;
  /** The model's tool-call id, when the caller has one. */
  toolCallId?: string;
  run?: Run;
  runId?: string;
}

/** How a returned value reads: a success, or an error reported as a value. */
export type ResultVerdict = "ok" | { retryable: boolean; code?: string };

/** How `guardTool` wraps a tool: its name, effect class, timeouts, budget and what counts as failure. */
export interface GuardToolSpec<R> {
  /** The tool's name: 1 to 64 letters, digits, '_', '.' or '-'. */
  name: string;
  /** What running it twice does: decides what may be retried. */
  effect: Effect;
  /** A policy, or its options. @default `policy()`'s defaults: 3 attempts with no deadline, up
   * to 10 within a run's; full jitter from 500 ms to 8 s */
  policy?: Policy | PolicyOptions;
  /** Shared per dependency (only with policy options). */
  budget?: Admission | RetryBudgetOptions;
  /** Shared per dependency, outside the retry (only with policy options). */
  breaker?: Breaker | CircuitBreakerOptions;
  attemptTimeoutMs?: number;
  deadlineMs?: number;
  /** Reads errors that arrive as values. @default the `{status:"error", error:{code,
   * retryable}}` convention; UNAVAILABLE and RATE_LIMITED codes are transient */
  readResult?: (value: R) => ResultVerdict;
  /** "envelope": give the model an error envelope. "throw": throw a ToolError carrying
   * it, for the framework's error callbacks. @default "envelope" */
  errors?: "envelope" | "throw";
  /** The run, when the guard is built for one (or a function returning the current one). */
  run?: Run | (() => Run | undefined);
  /** How long a `retry_later` answer stands for an identical call in the same run.
   * @default 30000 */
  retryLaterMs?: number;
}

/** A tool wrapped by `guardTool`: call it as the tool, with an optional run and signal. */
export type GuardedTool<A, R> = (
  args: A,
  options?: GuardedCallOptions,
) => Promise<R | ToolErrorEnvelope>;

/** The `{status:"error", error:{code, retryable}}` convention. A generic error with no
 * code is not transient: it hides bugs. */
export function readEnvelope(value: unknown): ResultVerdict {
  if (
    value === null ||
    typeof value !== "object" ||
    (value as { status?: unknown }).status !== "error"
  )
    return "ok";
  const e = (value as { error?: unknown }).error;
  const fields =
    e !== null && typeof e === "object" ? (e as { code?: unknown; retryable?: unknown }) : {};
  const code = typeof fields.code === "string" ? fields.code : undefined;
  const transient = code !== undefined && (isTransientCode(code) || fields.retryable === true);
  return { retryable: transient, ...(code !== undefined && { code }) };
}

/** A tool's error value, raised so the policy retries it; the last one is what the model
 * gets. It carries its own classification: nothing about it is HTTP. */
class ToolResultFailure extends Error {
  override name = "ToolResultFailure";
  readonly result: unknown;
  readonly failure: Failure;
  constructor(result: unknown, code: string | undefined) {
    super(`the tool reported ${code ?? "an error"}`);
    this.result = result;
    this.failure = transientFailure(code);
  }
}

const classifyResult = (error: unknown): Failure | undefined =>
  isA(error, ToolResultFailure) ? error.failure : undefined;

/** Failures that prove the dependency did nothing: safe to repeat even an unsafe write (a
 * tool that reported its failure as a value did nothing either). */
const nothingRan = (f: Failure, error: unknown): boolean =>
  isA(error, ToolResultFailure) || provesNothingRan(f);

const POLICY_PARTS = ["budget", "breaker", "attemptTimeoutMs", "deadlineMs"] as const;
const isPolicy = (p: unknown): p is Policy => typeof (p as Policy)?.execute === "function";
const isRunOrFn = (r: unknown) => typeof r === "function" || partsOf(r) !== undefined;

const SPEC = {
  name: (v, name, x) => {
    if (typeof x !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(x))
      v.fail(name, x, "1 to 64 letters, digits, '_', '.' or '-'");
    return x;
  },
  effect: (v, name, x) => v.oneOf(name, x, ["read", "idempotent", "unsafe"] as const),
  policy: opt.any<Policy | PolicyOptions>(
    (p) => p !== null && typeof p === "object",
    "a Policy or policy options",
  ),
  budget: opt.any<GuardToolSpec<unknown>["budget"]>(),
  breaker: opt.any<GuardToolSpec<unknown>["breaker"]>(),
  attemptTimeoutMs: opt.any<number>(),
  deadlineMs: opt.any<number>(),
  readResult: opt.fn<(value: unknown) => ResultVerdict>(),
  errors: opt.oneOf(["envelope", "throw"] as const, "envelope"),
  run: opt.any<GuardToolSpec<unknown>["run"]>(isRunOrFn, "a Run, or a function returning one"),
  retryLaterMs: opt.num({ default: 30_000 }),
} satisfies Record<keyof GuardToolSpec<unknown>, Rule<unknown>>;

/** The policy the guard retries with: the one given, or one built from the spec's parts. */
function buildPolicy(s: GuardToolSpec<unknown>, v: Validator): Policy {
  if (isPolicy(s.policy)) {
    for (const k of POLICY_PARTS)
      if (s[k] !== undefined)
        v.fail(k, s[k], "set on the policy itself when a built policy is given");
    return s.policy;
  }
  const options: PolicyOptions = { ...s.policy };
  for (const k of POLICY_PARTS)
    if (s[k] !== undefined) (options as Record<string, unknown>)[k] = s[k];
  return makePolicy(options);
}

interface Guard<A, R> {
  readonly name: string;
  readonly effect: Effect;
  readonly policy: Policy;
  readonly execute: (args: A, context: ToolCallContext & GuardedCallOptions) => R | PromiseLike<R>;
  readonly readResult: (value: R) => ResultVerdict;
  readonly errors: "envelope" | "throw";
  readonly run: GuardToolSpec<R>["run"];
  readonly retryLaterMs: number;
}

/** One idempotency key for this guard's retries; within a run, identical calls fold into
 * one key (the safe direction for payments). Else the model's tool-call id, else this
 * invocation's own. */
function keyFor(name: string, digest: string, runId: string | undefined, o: GuardedCallOptions) {
  if (runId) return `${runId}:${name}:${digest}`;
  return o.toolCallId ? `${name}:${o.toolCallId}` : `${name}:${randomUUID()}`;
}

/** The recorded answer, as the caller asked to get errors. */
function answer<A, R>(g: Guard<A, R>, prior: unknown): R | ToolErrorEnvelope {
  const env = prior as ToolErrorEnvelope;
  if (g.errors === "throw" && env?.status === "error" && typeof env.error?.action === "string")
    throw new ToolError(env);
  return prior as R | ToolErrorEnvelope;
}

/** Runs the tool under the policy; an error value flagged transient is raised to retry it. */
function attempt<A, R>(
  g: Guard<A, R>,
  args: A,
  key: string,
  options: GuardedCallOptions,
  run: Run | undefined,
) {
  // Bad arguments are the model's to fix, not a transport retry; an unsafe write is
  // retried only after a failure that proves nothing ran.
  const retryIf = (f: Failure, error: unknown) =>
    !isArgumentError(error) && (g.effect !== "unsafe" || nothingRan(f, error));
  const signal = options.signal ?? options.abortSignal;
  return g.policy.execute(
    async (ctx) => {
      const context = { ...options, idempotencyKey: key, signal: ctx.signal, attempt: ctx.attempt };
      const result = await g.execute(args, context);
      const verdict = g.readResult(result);
      if (verdict !== "ok" && verdict.retryable) throw new ToolResultFailure(result, verdict.code);
      return result;
    },
    {
      retryIf,
      classify: classifyResult,
      // A tool with effects is never raced by a second call of itself (rule 21).
      ...(g.effect !== "read" && { hedge: false as const }),
      // One safe to repeat waits for a refused retry while its deadline allows (rule 13).
      ...(g.effect !== "unsafe" && { patience: true }),
      ...(signal && { signal }),
      ...(run && { run }),
    },
  );
}

/** What the model gets when the policy gave up, remembered for the run's re-call guard. */
function giveUp<A, R>(g: Guard<A, R>, error: unknown, memo: ToolMemo | undefined, key: string) {
  if (
    reasonOf(error) === "cancelled" ||
    (isA(error, BreakwaterError) && error.reason.startsWith("run-"))
  )
    throw error;
  if (isA(error, ToolResultFailure)) {
    // The last error value is what the model gets, as the tool wrote it.
    memo?.remember(key, error.result, g.retryLaterMs);
    return error.result as R;
  }
  // A write that may have run and was not retried (a timeout, a reset, a cut answer, or
  // the deadline) has an unknown outcome.
  const f = failureOf(error);
  const cause = isA(error, BreakwaterError) ? error.cause : error;
  const unknown = g.effect === "unsafe" && f?.retryable === true && !nothingRan(f, cause);
  const env = envelopeFor(error, reasonOf(error), unknown);
  const standsFor = env.error.action === "retry_later" ? g.retryLaterMs : Number.POSITIVE_INFINITY;
  memo?.remember(key, env, standsFor);
  if (g.errors === "throw") throw scrubError(new ToolError(env, error));
  return env;
}

async function call<A, R>(g: Guard<A, R>, args: A, options: GuardedCallOptions = {}) {
  const run = options.run ?? (typeof g.run === "function" ? g.run() : g.run);
  const digest = argsDigest(args);
  // With a journaled run, a call made before at this place is answered from the journal
  // (docs/architecture.md, rule 14): the tool does not run again.
  const pending = journaled(run, "tool", () => `${g.name}:${digest}`);
  const slot = pending && (await pending); // no wait without a journal
  if (slot?.replayed) return answer(g, slot.answer);
  const record = slot?.replayed === false ? slot.record : undefined;
  try {
    const result = await guarded(g, args, digest, options, run);
    const json = jsonOf(result);
    if (json !== undefined) await record?.(json); // one JSON cannot hold is made again
    return result;
  } catch (error) {
    if (isA(error, ToolError)) await record?.(error.envelope); // what the model was told
    throw error;
  }
}

/** A result as the journal keeps it: JSON, or undefined when JSON cannot hold it. */
function jsonOf(value: unknown): unknown {
  try {
    const json = JSON.stringify(value);
    return json === undefined ? null : JSON.parse(json);
  } catch {
    return undefined;
  }
}

/** The call's answer: the run's standing answer to a failed call, or the tool's. */
async function guarded<A, R>(
  g: Guard<A, R>,
  args: A,
  digest: string,
  options: GuardedCallOptions,
  run: Run | undefined,
) {
  const memo = run === undefined ? undefined : partsOf(run)?.memo;
  memo?.checkCap();
  const memoKey = `${g.name}:${digest}`;
  const prior = memo?.recall(memoKey);
  if (prior !== undefined) return answer(g, prior);
  const key = keyFor(g.name, digest, run?.id ?? options.runId, options);
  try {
    const value = await attempt(g, args, key, options, run);
    if (g.readResult(value) !== "ok") memo?.remember(memoKey, value, Number.POSITIVE_INFINITY);
    return value;
  } catch (error) {
    return giveUp(g, error, memo, memoKey);
  }
}

/**
 * Wraps a tool so that retries are safe (docs/architecture.md, rule 13): reads retry
 * freely, idempotent writes retry with one idempotency key, unsafe writes retry only after
 * a failure that proves nothing ran (otherwise the model gets `OUTCOME_UNKNOWN` and is told
 * to check state). Errors that arrive as values are read; the model gets an envelope, not
 * a stack trace; within a run, the model calling a failed tool again with the same
 * arguments gets the recorded answer without the dependency being called (the fourth
 * retry layer, counted as modelRecalls).
 */
export function guardTool<A, R>(
  execute: (args: A, context: ToolCallContext & GuardedCallOptions) => R | PromiseLike<R>,
  spec: GuardToolSpec<R>,
): GuardedTool<A, R> {
  const v = new Validator("guardTool");
  v.fn("execute", execute);
  const s = parseOptions(v, SPEC, v.object("spec", spec)) as unknown as GuardToolSpec<R> &
    Required<Pick<GuardToolSpec<R>, "errors" | "retryLaterMs">>;
  const g: Guard<A, R> = {
    name: s.name,
    effect: s.effect,
    policy: buildPolicy(s as GuardToolSpec<unknown>, v),
    execute,
    readResult: s.readResult ?? (readEnvelope as (value: R) => ResultVerdict),
    errors: s.errors,
    run: s.run,
    retryLaterMs: s.retryLaterMs,
  };
  return (args, options) => call(g, args, options);
}
