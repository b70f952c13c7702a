import { Validator } from "../core/validate.ts";
import type { AttemptContext } from "./call.ts";
import { type ExecuteOptions, execute } from "./execute.ts";
import { type PolicyOptions, type ResolvedOptions, resolveOptions } from "./options.ts";
import { GuardedStream } from "./stream.ts";
import type { OpenStream, StreamOptions } from "./stream-options.ts";

/** One attempt of a call: handed the attempt's context (its number, signal and deadline). */
export type Operation<T> = (context: AttemptContext) => T | PromiseLike<T>;

/** A retry policy: one logical call at a time through `execute` or `stream`. */
export interface Policy {
  /** The validated, frozen options. */
  readonly options: ResolvedOptions;
  /** Runs one logical call under the policy. */
  execute<T>(operation: Operation<T>, options?: ExecuteOptions<T>): Promise<T>;
  /** Streams the provider's chunks under the policy: an AsyncIterable with `.ledger` and
   * `.done` (the outcome). Retries only before the first content chunk (by default). */
  stream<C>(open: OpenStream<C>, options?: StreamOptions<C>): GuardedStream<C>;
}

/** Builds an immutable retry policy. Every option is validated here, not at first use. */
export function policy(options: PolicyOptions = {}): Policy {
  const resolved = resolveOptions(options, new Validator("policy"));
  return Object.freeze({
    options: resolved,
    execute: <T>(operation: Operation<T>, opts?: ExecuteOptions<T>) =>
      execute(resolved, operation, opts),
    stream: <C>(open: OpenStream<C>, opts?: StreamOptions<C>) =>
      new GuardedStream(resolved, open, opts),
  });
}
