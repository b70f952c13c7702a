import type { AttemptContext } from "./call.ts";
import { type ExecuteOptions, execute } from "./execute.ts";
import { type PolicyOptions, type ResolvedOptions, resolveOptions } from "./options.ts";

export interface Policy {
  /** The validated, frozen options. */
  readonly options: ResolvedOptions;
  execute<T>(
    operation: (context: AttemptContext) => T | PromiseLike<T>,
    options?: ExecuteOptions,
  ): Promise<T>;
}

/** Builds an immutable retry policy. Every option is validated here, not at first use. */
export function policy(options: PolicyOptions = {}): Policy {
  const resolved = resolveOptions(options);
  return Object.freeze({
    options: resolved,
    execute: <T>(
      operation: (context: AttemptContext) => T | PromiseLike<T>,
      opts?: ExecuteOptions,
    ) => execute(resolved, operation, opts),
  });
}
