import {
  type AdaptiveAdmissionOptions,
  type CircuitBreakerOptions,
  ConfigError,
} from "../index.ts";
import { SharedAdaptiveAdmission } from "./admission.ts";
import { SharedBreaker } from "./breaker.ts";
import { SharedRetryBudget, type SharedRetryBudgetOptions } from "./budget.ts";
import { Fleet, type FleetOptions } from "./state.ts";

export { SharedAdaptiveAdmission } from "./admission.ts";
export { SharedBreaker } from "./breaker.ts";
export { SharedRetryBudget, type SharedRetryBudgetOptions } from "./budget.ts";
export { Fleet, type FleetOptions, type RedisLike } from "./state.ts";

/** Shared state for one fleet of processes, on one Redis: pass what it makes as a
 * policy's `budget` and `breaker`, one per upstream (provider × model × key). */
export interface SharedState {
  readonly fleet: Fleet;
  /** Overload-aware admission over every process's attempts (the policy's default, shared). */
  admission(
    upstream: string,
    options?: Omit<AdaptiveAdmissionOptions, "clock">,
  ): SharedAdaptiveAdmission;
  /** A retry budget (token bucket) every process draws on. */
  budget(upstream: string, options?: SharedRetryBudgetOptions): SharedRetryBudget;
  /** A circuit breaker the first process to open opens for all. */
  breaker(upstream: string, options?: Omit<CircuitBreakerOptions, "clock">): SharedBreaker;
  /** Stops syncing (the client is yours to close). */
  close(): void;
}

/**
 * Shares the retry budget, the adaptive admission and the circuit breaker of each upstream
 * across processes through Redis (docs/architecture.md, rule 18). Decisions stay local and
 * synchronous; each process syncs every `syncMs` (the staleness bound); when Redis is slow
 * or down, each process decides alone within `staleAfterMs` and rejoins when it answers.
 * Nothing it does throws into a call's path.
 */
export function sharedState(options: FleetOptions): SharedState {
  // A node-redis client not connected yet would queue or refuse every sync: say so now.
  const client = options?.client as { isOpen?: unknown } | undefined;
  if (client?.isOpen === false)
    throw new ConfigError(
      "sharedState",
      "client",
      "a client that is not connected",
      "a connected client (await client.connect() first)",
    );
  const fleet = new Fleet(options);
  return {
    fleet,
    admission: (upstream, o) => new SharedAdaptiveAdmission(fleet, checked(upstream), o),
    budget: (upstream, o) => new SharedRetryBudget(fleet, checked(upstream), o),
    breaker: (upstream, o) => new SharedBreaker(fleet, checked(upstream), o),
    close: () => fleet.close(),
  };
}

function checked(upstream: unknown): string {
  if (typeof upstream !== "string" || upstream === "" || /[{}]/.test(upstream))
    throw new ConfigError(
      "sharedState",
      "upstream",
      upstream,
      'a non-empty name without braces (e.g. "openai:gpt-4o:key1")',
    );
  return upstream;
}
