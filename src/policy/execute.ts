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

/** Checks what a caller hands `execute`; a bad value rejects naming it. */
function check(operation: unknown, options: ExecuteOptions | undefined): void {
  V.fn("operation", operation);
  if (options !== undefined) checkOptions(V, RULES, options);
}

/** Runs `operation` under the policy: one logical call, as many attempts as the rules allow.
 * Written with `then` rather than `async`: the success path is what every call pays. */
export function execute<T>(
  o: ResolvedOptions,
  operation: (context: AttemptContext) => T | PromiseLike<T>,
  options?: ExecuteOptions,
): Promise<T> {
  let call: Call;
  try {
    if (typeof operation !== "function" || options !== undefined) check(operation, options);
    call = new Call(o, options);
  } catch (error) {
    return Promise.reject(error);
  }
  const readUsage = options?.usage;
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
        call.succeed(readUsage ? readUsage(value) : call.usageOf(value));
        return value;
      },
      (error) => call.fail(error).then(attempt),
    );
  };
  return attempt();
}
