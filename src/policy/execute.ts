import type { Usage } from "../core/usage.ts";
import { checker, checkOptions, opt, type Rule, Validator } from "../core/validate.ts";
import type { AttemptScope } from "./attempt-scope.ts";
import { type AttemptContext, CALL_SPEC, Call, type CallOptions } from "./call.ts";
import type { ResolvedOptions } from "./options.ts";

export interface ExecuteOptions extends CallOptions {
  /** Reads token usage from the result (overrides the policy's `usage`). */
  usage?: (result: unknown) => Partial<Usage> | undefined;
}

const RULES = checker({
  ...CALL_SPEC,
  usage: opt.fn<ExecuteOptions["usage"]>(),
} satisfies Record<keyof ExecuteOptions, Rule<unknown>>);

const V = new Validator("policy.execute");

/** What is wrong with what a caller hands `execute`, as the error to reject with. */
function invalid(operation: unknown, options: ExecuteOptions | undefined): unknown {
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
  options?: ExecuteOptions,
): Promise<T> {
  if (typeof operation !== "function" || options !== undefined) {
    const bad = invalid(operation, options);
    if (bad !== undefined) return Promise.reject(bad);
  }
  const call = new Call(o, options);
  const readUsage = options?.usage ?? o.usage;
  const attempt = (): Promise<T> => {
    let p: Promise<T>;
    let scope: AttemptScope;
    try {
      scope = call.begin();
      p = Promise.resolve(operation(scope));
    } catch (e) {
      if (scope! === undefined) return Promise.reject(e);
      p = Promise.reject(e);
    }
    return scope.race(p).then(
      (value) => {
        call.succeed(readUsage === undefined ? undefined : call.usageOf(value, readUsage));
        return value;
      },
      (error) => call.fail(error).then(attempt),
    );
  };
  return attempt();
}
