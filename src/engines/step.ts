import {
  type CallOptions,
  ConfigError,
  durableStep,
  type Fallback,
  type Policy,
  reasonOf,
  type StepContext,
  type StepOutcome,
  type StepState,
} from "../index.ts";
import { opt, parseOptions, stepContext } from "../internal.ts";
import { asPolicy } from "../providers/shared.ts";

/** What a step's operation is: handed the attempt's context and the step's key. */
export type StepOperation<T> = (context: StepContext) => T | PromiseLike<T>;

/** What a step runs: an operation under the step's policy, or a chain (a `fallback` or a
 * `pool`) under its upstreams' policies, moving on inside the step. */
export type StepTarget<T> = StepOperation<T> | Fallback<T>;

/** The per-call options a durable step passes to its policy. */
export type StepCallOptions = Pick<
  CallOptions,
  | "deadlineMs"
  | "attemptTimeoutMs"
  | "effect"
  | "cost"
  | "priority"
  | "model"
  | "provider"
  | "operation"
  | "hedge"
  | "retryIf"
  | "classify"
>;

/** What every engine's step wrapper takes: the policy, the hold, and the call's options. */
export interface StepOptions extends StepCallOptions {
  /** The policy that owns retry inside the step, built once (`policy({ ... })`) and shared
   * with the clients the step calls through (`withBreakwater(client, { policy })`), so its
   * limiter, admission and breaker see every call to that upstream. @default one
   * `policy()` shared by every step of the process that names none */
  policy?: Policy;
  /** The longest wait slept in the process between two attempts; a longer one (a
   * Retry-After, an open breaker's cool-off) is waited in the engine's own timer. @default 5000 */
  holdMs?: number;
}

const SPEC = {
  // Options would build a new policy at every step, each with an admission, a breaker and
  // a limiter that see one call: a built one is asked for.
  policy: opt.any<Policy>(
    (p) => typeof (p as Policy)?.execute === "function" && (p as Policy).options !== undefined,
    "a Policy built once (policy({ ... })), shared by the steps that call one upstream",
  ),
  holdMs: opt.num({ min: 0, default: 5_000 }),
};

/** The steps' policy when none is named: one for the process, made at first use. */
let shared: Policy | undefined;
const CALL_KEYS = [
  "deadlineMs",
  "attemptTimeoutMs",
  "effect",
  "cost",
  "priority",
  "model",
  "provider",
  "operation",
  "hedge",
  "retryIf",
  "classify",
] as const satisfies readonly (keyof StepCallOptions)[];

/** A step wrapper's options, checked by name (the call's own are checked as every call's
 * are), with the policy built once. */
export interface Resolved {
  readonly policy: Policy;
  readonly holdMs: number;
  readonly call: StepCallOptions;
}

/** Reads a wrapper's options under its own name (`owner`); a chain brings its own
 * policies, so none is given beside it. */
export function resolveStep(
  owner: string,
  target: StepTarget<unknown>,
  options: StepOptions | undefined,
): Resolved {
  if (typeof target !== "function" && (target === null || typeof target?.execute !== "function"))
    throw new ConfigError(owner, "step", target, "a function, or a fallback() or pool() chain");
  if (typeof target !== "function" && options?.policy !== undefined)
    throw new ConfigError(
      owner,
      "policy",
      options.policy,
      "absent beside a chain (its upstreams' policies rule)",
    );
  if (options !== undefined && (options === null || typeof options !== "object"))
    parseOptions(owner, SPEC, options); // throws, naming the owner
  const given = (options ?? {}) as Record<string, unknown>;
  const call: Record<string, unknown> = {};
  const own: Record<string, unknown> = {};
  for (const key of Object.keys(given))
    ((CALL_KEYS as readonly string[]).includes(key) ? call : own)[key] = given[key];
  const o = parseOptions(owner, SPEC, own);
  const policy = o.policy ?? (shared ??= asPolicy(undefined));
  return { policy, holdMs: o.holdMs, call: call as StepCallOptions };
}

/** What an engine journals of one leg: the value, or the wait and the step's state. */
export type Leg<T> = StepOutcome<T>;

/** Runs one leg of the step keyed `key` (its value, or a wait for the engine); a final
 * failure is thrown for the engine's wrapper to turn into its terminal error. */
export function leg<T>(
  r: Resolved,
  target: StepTarget<T>,
  key: string,
  state: StepState | undefined,
  signal?: AbortSignal,
): Promise<Leg<T>> {
  const step = { ...r.call, state, holdMs: r.holdMs, ...(signal && { signal }) };
  if (typeof target !== "function") return durableStep(target, undefined, step);
  return durableStep(r.policy, (c) => target(stepContext(c, key)), step);
}

/** The words a final failure is recorded under in the engine: breakwater's reason first. */
export function finalWords(error: unknown): string {
  const reason = reasonOf(error) ?? "failed";
  const message = (error as { message?: unknown } | null)?.message;
  return `breakwater gave up (${reason}): ${typeof message === "string" ? message : String(error)}`;
}
