import type { Usage } from "../core/usage.ts";
import { type AttemptContext, Call, type CallOptions } from "./call.ts";
import type { ResolvedOptions } from "./options.ts";

export interface ExecuteOptions extends CallOptions {
  /** Reads token usage from the result (overrides the policy's `usage`). */
  usage?: (result: unknown) => Partial<Usage> | undefined;
}

/** Runs `operation` under the policy: one logical call, as many attempts as the rules allow. */
export async function execute<T>(
  o: ResolvedOptions,
  operation: (context: AttemptContext) => T | PromiseLike<T>,
  options: ExecuteOptions = {},
): Promise<T> {
  const call = new Call(o, options);
  for (;;) {
    const { scope, context } = call.begin();
    let value: T;
    try {
      let p: Promise<T>;
      try {
        p = Promise.resolve(operation(context));
      } catch (e) {
        p = Promise.reject(e);
      }
      value = await scope.race(p);
    } catch (error) {
      await call.fail(error);
      continue;
    }
    call.succeed(options.usage ? options.usage(value) : call.usageOf(value));
    return value;
  }
}
