import { randomUUID } from "node:crypto";
import type { CircuitBreaker } from "../core/breaker.ts";
import type { RetryBudget } from "../core/budget.ts";
import { BreakwaterError, failureOf, reasonOf } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import { validator } from "../core/validate.ts";
import type { PolicyOptions } from "../policy/options.ts";
import { policy as makePolicy, type Policy } from "../policy/policy.ts";
import type { Run } from "../run/run.ts";
import { argsDigest } from "./canonical.ts";
import { envelopeFor, isArgumentError, ToolError, type ToolErrorEnvelope } from "./envelope.ts";

/** What running a tool twice does. */
export type Effect = "read" | "idempotent" | "unsafe";

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

export interface GuardToolSpec<R> {
  name: string;
  effect: Effect;
  /** A policy, or its options. Default: 3 attempts, full jitter from 200 ms, cap 2 s. */
  policy?: Policy | PolicyOptions;
  /** Shared per dependency (only with policy options). */
  budget?: RetryBudget;
  /** Shared per dependency, outside the retry (only with policy options). */
  breaker?: CircuitBreaker;
  attemptTimeoutMs?: number;
  deadlineMs?: number;
  /** Reads errors that arrive as values. Default: the `{status:"error", error:{code,
   * retryable}}` convention; UNAVAILABLE and RATE_LIMITED codes are transient. */
  readResult?: (value: R) => ResultVerdict;
  /** "envelope" (default): give the model an error envelope. "throw": throw a ToolError
   * carrying it, for the framework's error callbacks. */
  errors?: "envelope" | "throw";
  /** The run, when the guard is built for one (or a function returning the current one). */
  run?: Run | (() => Run | undefined);
  /** How long a `retry_later` answer stands for an identical call in the same run. Default 30 s. */
  retryLaterMs?: number;
}

export type GuardedTool<A, R> = (
  args: A,
  options?: GuardedCallOptions,
) => Promise<R | ToolErrorEnvelope>;

const TRANSIENT_CODES = new Set(["UNAVAILABLE", "RATE_LIMITED", "RESOURCE_EXHAUSTED"]);
const NEVER_RAN_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"]);

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
  const code = e !== null && typeof e === "object" ? (e as { code?: unknown }).code : undefined;
  const flagged =
    e !== null && typeof e === "object" && (e as { retryable?: unknown }).retryable === true;
  const transient = typeof code === "string" && (TRANSIENT_CODES.has(code) || flagged);
  return { retryable: transient, ...(typeof code === "string" && { code }) };
}

/** A tool's error value, raised so the policy retries it; the last one is what the model gets. */
class ToolResultFailure extends Error {
  override name = "ToolResultFailure";
  readonly result: unknown;
  readonly status: number;
  readonly code: string;
  constructor(result: unknown, code: string | undefined) {
    super(`the tool reported ${code ?? "an error"}`);
    this.result = result;
    this.code = code ?? "UNAVAILABLE";
    this.status = this.code === "RATE_LIMITED" || this.code === "RESOURCE_EXHAUSTED" ? 429 : 503;
  }
}

/** Failures that prove the dependency did nothing: safe to repeat even an unsafe write. */
function provesNothingRan(f: Failure, error: unknown): boolean {
  if (error instanceof ToolResultFailure) return true;
  if (f.status === 429 || f.status === 503) return true;
  return f.kind === "transport" && f.code !== undefined && NEVER_RAN_CODES.has(f.code);
}

const DEFAULT_POLICY: PolicyOptions = { maxAttempts: 3, backoff: { baseMs: 200, capMs: 2_000 } };

function buildPolicy<R>(spec: GuardToolSpec<R>, v: ReturnType<typeof validator>): Policy {
  const given = spec.policy;
  const isPolicy = given !== undefined && typeof (given as Policy).execute === "function";
  if (isPolicy) {
    for (const k of ["budget", "breaker", "attemptTimeoutMs", "deadlineMs"] as const) {
      if (spec[k] !== undefined)
        v.fail(k, spec[k], "set on the policy itself when a built policy is given");
    }
    return given as Policy;
  }
  const options: PolicyOptions = { ...DEFAULT_POLICY, ...(given as PolicyOptions | undefined) };
  if (spec.budget !== undefined) options.budget = spec.budget;
  if (spec.breaker !== undefined) options.breaker = spec.breaker;
  if (spec.attemptTimeoutMs !== undefined) options.attemptTimeoutMs = spec.attemptTimeoutMs;
  if (spec.deadlineMs !== undefined) options.deadlineMs = spec.deadlineMs;
  return makePolicy(options);
}

/**
 * Wraps a tool so that retries are safe: reads retry freely, idempotent writes retry with
 * one idempotency key, unsafe writes retry only after a failure that proves nothing ran
 * (otherwise the model gets `outcome_unknown` and is told to check state). Errors that
 * arrive as values are read; the model gets an envelope, not a stack trace; within a run,
 * the model calling a failed tool again with the same arguments gets the recorded answer
 * without the dependency being called (the fourth retry layer, counted as modelRecalls).
 */
export function guardTool<A, R>(
  execute: (args: A, context: ToolCallContext & GuardedCallOptions) => R | PromiseLike<R>,
  spec: GuardToolSpec<R>,
): GuardedTool<A, R> {
  const v = validator("guardTool");
  v.fn("execute", execute);
  v.object("spec", spec);
  v.known("", spec as unknown as Record<string, unknown>, [
    "name",
    "effect",
    "policy",
    "budget",
    "breaker",
    "attemptTimeoutMs",
    "deadlineMs",
    "readResult",
    "errors",
    "run",
    "retryLaterMs",
  ]);
  if (typeof spec.name !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(spec.name)) {
    v.fail("name", spec.name, "1 to 64 letters, digits, '_', '.' or '-'");
  }
  const effect = v.oneOf("effect", spec.effect, ["read", "idempotent", "unsafe"] as const);
  const errors = v.oneOf("errors", spec.errors ?? "envelope", ["envelope", "throw"] as const);
  const readResult =
    spec.readResult === undefined
      ? readEnvelope
      : v.fn<(value: R) => ResultVerdict>("readResult", spec.readResult);
  const retryLaterMs =
    spec.retryLaterMs === undefined ? 30_000 : v.num("retryLaterMs", spec.retryLaterMs, 0);
  const p = buildPolicy(spec, v);
  const name = spec.name;
  const runOf = (o: GuardedCallOptions): Run | undefined =>
    o.run ?? (typeof spec.run === "function" ? spec.run() : spec.run);

  return async (args: A, options: GuardedCallOptions = {}) => {
    const run = runOf(options);
    const digest = argsDigest(args);
    const memo = `${name}:${digest}`;
    if (run && run.stats.toolFailures >= run.maxToolFailures) {
      throw new BreakwaterError(
        "run-tool-failures",
        {},
        `the run hit its cap of ${run.maxToolFailures} tool failures`,
      );
    }
    const prior = run?.recallToolFailure(memo);
    if (prior !== undefined) {
      run!.stats.modelRecalls++;
      return answer(prior);
    }
    // One key for this guard's retries; within a run, identical calls fold into one key
    // (the safe direction for payments). Else the model's tool-call id, else this invocation.
    const runId = run?.id ?? options.runId;
    const key = runId
      ? `${runId}:${name}:${digest}`
      : options.toolCallId
        ? `${name}:${options.toolCallId}`
        : `${name}:${randomUUID()}`;
    const signal = options.signal ?? options.abortSignal;
    // Bad arguments are the model's to fix, not a transport retry; an unsafe write is
    // retried only after a failure that proves nothing ran.
    const retryIf = (f: Failure, error: unknown) =>
      !isArgumentError(error) && (effect !== "unsafe" || provesNothingRan(f, error));
    try {
      const value = await p.execute(
        async (ctx) => {
          const context = {
            ...options,
            idempotencyKey: key,
            signal: ctx.signal,
            attempt: ctx.attempt,
          };
          const result = await execute(args, context);
          const verdict = readResult(result);
          if (verdict !== "ok" && verdict.retryable)
            throw new ToolResultFailure(result, verdict.code);
          return result;
        },
        { retryIf, ...(signal && { signal }), ...(run && { run }) },
      );
      if (readResult(value) !== "ok")
        run?.rememberToolFailure(memo, value, Number.POSITIVE_INFINITY);
      return value;
    } catch (error) {
      if (
        reasonOf(error) === "cancelled" ||
        (error instanceof BreakwaterError && error.reason.startsWith("run-"))
      )
        throw error;
      if (error instanceof ToolResultFailure) {
        // The last error value is what the model gets, as the tool wrote it.
        run?.rememberToolFailure(memo, error.result, retryLaterMs);
        return error.result as R;
      }
      // A write that may have run and was not retried (a timeout, a reset, a cut answer,
      // or the deadline) has an unknown outcome.
      const f = failureOf(error);
      const cause = error instanceof BreakwaterError ? error.cause : error;
      const outcomeUnknown =
        effect === "unsafe" && f?.retryable === true && !provesNothingRan(f, cause);
      const env = envelopeFor(error, reasonOf(error), outcomeUnknown);
      run?.rememberToolFailure(
        memo,
        env,
        env.error.action === "retry_later" ? retryLaterMs : Number.POSITIVE_INFINITY,
      );
      if (errors === "throw") throw new ToolError(env, error);
      return env;
    }
  };

  function answer(prior: unknown): R | ToolErrorEnvelope {
    const env = prior as ToolErrorEnvelope;
    if (errors === "throw" && env?.status === "error" && typeof env.error?.action === "string")
      throw new ToolError(env);
    return prior as R | ToolErrorEnvelope;
  }
}
