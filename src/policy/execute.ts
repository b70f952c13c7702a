import type { OutputError } from "../core/errors.ts";
import { checkOutput, OUTPUT_SPEC, type OutputOptions } from "../core/output.ts";
import type { Usage } from "../core/usage.ts";
import { checker, checkOptions, opt, type Rule, Validator } from "../core/validate.ts";
import { Attempt, type AttemptEnd, type AttemptOwner, type Grant } from "./attempt.ts";
import { type AttemptContext, CALL_SPEC, Call, type CallOptions } from "./call.ts";
import { hedged } from "./hedged.ts";
import type { ResolvedOptions } from "./options.ts";

/** @internal Marks options built by breakwater's own fetch layer, from values it checked
 * when it was made: they are not checked again on every call (a check of a dozen options
 * costs as much as the rest of a call's success path). */
export const CHECKED = Symbol("breakwater.checked");

/** What `policy.execute` takes for one call: the call options, how to read usage, and the output checks. */
export interface ExecuteOptions<T = unknown> extends CallOptions, OutputOptions<T> {
  /** Reads token usage from the result (overrides the policy's `usage`). */
  usage?: (result: unknown) => Partial<Usage> | undefined;
  /** @internal */
  [CHECKED]?: true;
}

const RULES = checker({
  ...CALL_SPEC,
  usage: opt.fn<ExecuteOptions["usage"]>(),
  ...OUTPUT_SPEC,
} satisfies Record<Exclude<keyof ExecuteOptions, typeof CHECKED>, Rule<unknown>>);

const V = new Validator("policy.execute");

const OK: AttemptEnd = { how: "ok" };

/** What is wrong with what a caller hands `execute`, as the error to reject with. */
function invalid(operation: unknown, options: ExecuteOptions<never> | undefined): unknown {
  try {
    V.fn("operation", operation);
    if (options !== undefined) checkOptions(V, RULES, options);
  } catch (error) {
    return error;
  }
  return undefined;
}

/** Runs `operation` under the policy: one logical call, as many attempts as the rules allow.
 * Written with `then` rather than `async`: the success path is what every call pays. */
export function execute<T>(
  o: ResolvedOptions,
  operation: (context: AttemptContext) => T | PromiseLike<T>,
  options?: ExecuteOptions<T>,
): Promise<T> {
  if (typeof operation !== "function" || (options !== undefined && options[CHECKED] !== true)) {
    const bad = invalid(operation, options);
    if (bad !== undefined) return Promise.reject(bad);
  } else if (options === undefined && o.lean !== undefined) {
    const grants = o.gates.tryEnter(o.lean);
    if (grants !== undefined) return lean(o, o.lean, grants, operation);
  }
  return loop(o, new Call(o, options), operation, options);
}

/**
 * The lean path: a call with no options under a policy with nothing to bound, watch or
 * refuse runs its first attempt with no Call at all (the success path is what every call
 * pays); only if it fails is the Call made, taking the attempt over as if it had begun
 * it, and the loop goes on as for any call.
 */
function lean<T>(
  o: ResolvedOptions,
  owner: AttemptOwner,
  grants: readonly Grant[],
  operation: (context: AttemptContext) => T | PromiseLike<T>,
): Promise<T> {
  const a = new Attempt(owner, 1, o.clock.now(), grants);
  let p: Promise<T>;
  try {
    p = Promise.resolve(a.run(operation));
  } catch (e) {
    p = Promise.reject(e);
  }
  return a.race(p).then(
    (value) => {
      a.end(OK);
      return value;
    },
    (error) => {
      const call = new Call(o, undefined, false, a);
      return call.fail(error).then(() => loop(o, call, operation, undefined));
    },
  );
}

/** Attempts of `call` until one succeeds or the call gives up. */
function loop<T>(
  o: ResolvedOptions,
  call: Call,
  operation: (context: AttemptContext) => T | PromiseLike<T>,
  options: ExecuteOptions<T> | undefined,
): Promise<T> {
  const readUsage = options?.usage ?? o.usage;
  const output =
    options?.validate === undefined && options?.truncated === undefined ? undefined : options;
  const run = (a: Attempt): Promise<T> => {
    let p: Promise<T>;
    try {
      p = Promise.resolve(a.run(operation));
    } catch (e) {
      p = Promise.reject(e);
    }
    return a.race(p);
  };
  const send = (a: Attempt): Promise<T> => {
    const delay = call.hedgeDelay(a);
    if (delay !== undefined) a.racing = true;
    const p = run(a);
    const raced = delay === undefined ? p : hedged(call, a, p, run, delay);
    return settleAttempt(call, raced, readUsage, output, attempt);
  };
  // The gates first (rule 1): at once, or (a rate limiter) after a wait.
  const attempt = (): Promise<T> => {
    let a: Attempt | Promise<Attempt>;
    try {
      a = call.begin();
    } catch (e) {
      return Promise.reject(e);
    }
    return a instanceof Promise ? a.then(send) : send(a);
  };
  return attempt();
}

/** Books the attempt's outcome: success (after the output checks) or a failure that
 * either retries through `again` or rejects with what the caller sees. */
function settleAttempt<T>(
  call: Call,
  raced: Promise<T>,
  readUsage: ExecuteOptions["usage"],
  output: OutputOptions<T> | undefined,
  again: () => Promise<T>,
): Promise<T> {
  return raced.then(
    (value) => {
      const usage = readUsage === undefined ? undefined : call.usageOf(value, readUsage);
      if (output === undefined) {
        call.succeed(usage);
        return value;
      }
      return checked(call, value, usage, output, again);
    },
    (error) => call.fail(error).then(again),
  );
}

/** The answer counts only once it passes its checks (rule 11): a bad one's tokens are
 * wasted, and an invalid one is retried like any failure. A check that answers at once
 * (all but an async schema) is taken at once, with no promise between. */
function checked<T>(
  call: Call,
  value: T,
  usage: Partial<Usage> | undefined,
  output: OutputOptions<T>,
  again: () => Promise<T>,
): T | Promise<T> {
  const verdict = (bad: OutputError | undefined): T | Promise<T> => {
    if (bad === undefined) {
      call.succeed(usage);
      return value;
    }
    return call.fail(bad, { usage }).then(again);
  };
  const bad = checkOutput(value, output);
  return bad instanceof Promise ? bad.then(verdict) : verdict(bad);
}
