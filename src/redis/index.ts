/**
 * Shared state for a fleet on Redis: one retry budget, admission and breaker per
 * upstream across processes, and a rate limiter's 429 holds and spending, with every
 * decision local.
 *
 * @example
 * ```ts
 * import { policy } from "breakwater";
 * import { sharedState } from "breakwater/redis";
 * import { createClient } from "redis";
 *
 * const client = createClient({ url: process.env.REDIS_URL, disableOfflineQueue: true });
 * client.on("error", () => {}); // breakwater decides locally while Redis is away
 * await client.connect();
 * const fleet = sharedState({ client, prefix: "myapp" });
 * const p = policy({ admission: fleet.admission("openai:gpt-4o:key-1") });
 * await fleet.sync();
 * console.log(await p.execute(async () => "an answer"), fleet.stats.healthy);
 * fleet.close();
 * await client.close();
 * ```
 * @module breakwater/redis
 */
import {
  type AdaptiveAdmissionOptions,
  type CircuitBreakerOptions,
  ConfigError,
  type Limiter,
} from "../index.ts";
import { SharedAdaptiveAdmission } from "./admission.ts";
import { SharedBreaker } from "./breaker.ts";
import { SharedRetryBudget, type SharedRetryBudgetOptions } from "./budget.ts";
import { SharedLimiter } from "./limiter.ts";
import { Fleet, type FleetOptions } from "./state.ts";

export { SharedAdaptiveAdmission } from "./admission.ts";
export { SharedBreaker } from "./breaker.ts";
export { SharedRetryBudget, type SharedRetryBudgetOptions } from "./budget.ts";
export { SharedHoldLimiter, SharedLimiter } from "./limiter.ts";
export { Fleet, type FleetOptions, type RedisLike } from "./state.ts";

/** Shared state for one fleet of processes, on one Redis: pass what it makes as a
 * policy's `budget` and `breaker`, one per upstream (provider × model × key). */
export interface SharedState {
  /** The syncing underneath (its `sync()` and `stats` are also here). */
  readonly fleet: Fleet;
  /** Syncs every piece of state now; decisions are local until the first sync lands. */
  sync(): Promise<void>;
  /** How syncing goes: syncs and failures so far, the last error, and whether it is healthy. */
  readonly stats: Fleet["stats"];
  /** Overload-aware admission over every process's attempts (the policy's default, shared). */
  admission(
    upstream: string,
    options?: Omit<AdaptiveAdmissionOptions, "clock">,
  ): SharedAdaptiveAdmission;
  /** A retry budget (token bucket) every process draws on. */
  budget(upstream: string, options?: SharedRetryBudgetOptions): SharedRetryBudget;
  /** A circuit breaker the first process to open opens for all. */
  breaker(upstream: string, options?: Omit<CircuitBreakerOptions, "clock">): SharedBreaker;
  /** `local` (a process's own rate limiter), its 429 holds and its spending shared: a
   * Retry-After one process hears holds every process's limiter for that upstream, and
   * what each lets go is taken from the others' buckets. */
  limiter(upstream: string, local: Limiter): SharedLimiter;
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
    sync: () => fleet.sync(),
    get stats() {
      return fleet.stats;
    },
    admission: (upstream, o) => new SharedAdaptiveAdmission(fleet, checked(upstream), o),
    budget: (upstream, o) => new SharedRetryBudget(fleet, checked(upstream), o),
    breaker: (upstream, o) => new SharedBreaker(fleet, checked(upstream), o),
    limiter: (upstream, local) => new SharedLimiter(fleet, checked(upstream), local),
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
