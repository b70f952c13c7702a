import { AsyncLocalStorage } from "node:async_hooks";
import type { Effect } from "../core/effects.ts";
import type { Limiter } from "../core/limiter.ts";
import type { Usage } from "../core/usage.ts";
import type { AttemptContext } from "./call.ts";

/**
 * The attempt whose operation is running, as code it calls can read it (rule 15: one
 * owner per failure class). A wrapped SDK client called inside another policy's attempt (a
 * leg of a fallback chain, a pool's deployment, a user's own `execute`) finds it here and
 * sends its request as that attempt, instead of looping on its own.
 */
export interface OuterAttempt extends AttemptContext {
  /** The limiter of the policy the attempt belongs to: it hears the answer's headers. */
  readonly limiter: Limiter | undefined;
  /** What a layer under the attempt spent (its ledger's tokens), added to the attempt's. */
  spend(usage: Partial<Usage>): void;
  /** What sending the attempt's request again does, as the layer that sent it read it: an
   * `unsafe` one makes the outer call's retry follow rule 20. */
  sends(effect: Effect): void;
}

const store = new AsyncLocalStorage<OuterAttempt>();
/** Off until a layer that reads it exists: a policy used alone pays nothing for it. */
let wanted = false;

/** A layer that reads the ambient attempt (the fetch layer) turns it on when made. */
export function wantAmbient(): void {
  wanted = true;
}

/** Runs `fn(attempt)` as the attempt's operation: what it calls reads the attempt. */
export function inAmbient<A extends OuterAttempt, T>(attempt: A, fn: (a: A) => T): T {
  return wanted ? store.run(attempt, fn, attempt) : fn(attempt);
}

/** The attempt whose operation is running, if any. */
export function ambientAttempt(): OuterAttempt | undefined {
  return wanted ? store.getStore() : undefined;
}
