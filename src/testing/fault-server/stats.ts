import type { Route } from "./script.ts";

/** One arrival, for the timeline. `outcome` is the status sent, or what happened instead. */
export interface Arrival {
  /** ms since the server started. */
  at: number;
  route: Route;
  model?: string;
  tool?: string;
  /** The retries so far the request said it was on (`x-stainless-retry-count`, or
   * `x-retry-attempt` less one): a layer that retries on its own shows as 0, 1, 2, 0, 1, 2. */
  retries?: number;
  outcome?: string;
  /** The index of the script's rule that shaped it; absent for a healthy answer. */
  rule?: number;
  /** Tokens billed for it (input once generation began, output as sent). */
  billed?: number;
  /** When its connection closed (answered, cut, or dropped by the client), ms since the
   * server started. */
  closedAt?: number;
}

/** What the tool endpoint did: executions, replays, duplicates. */
export interface ToolStats {
  /** Side effects performed. */
  executed: number;
  /** Repeats answered from the idempotency ledger without executing. */
  duplicatesPrevented: number;
  /** Side effects performed again for the same tool and arguments: double charges. */
  duplicateEffects: number;
  /** 409: a repeat while the first was still running. */
  conflicts: number;
  /** 422: the same key with a different body. */
  mismatches: number;
}

/** What the fault server received and answered. */
export interface FaultStats {
  requests: number;
  byRoute: Record<string, { requests: number; byOutcome: Record<string, number> }>;
  /** Tokens billed: input once generation began, output as sent. One token per word. */
  billed: { inputTokens: number; outputTokens: number };
  tools: ToolStats;
  inFlight: number;
  maxInFlight: number;
  timeline: Arrival[];
  /** Turns appended to each stored conversation (OpenAI's Conversations API). */
  conversations?: Record<string, number>;
}

export function emptyStats(): FaultStats {
  return {
    requests: 0,
    byRoute: {},
    billed: { inputTokens: 0, outputTokens: 0 },
    tools: {
      executed: 0,
      duplicatesPrevented: 0,
      duplicateEffects: 0,
      conflicts: 0,
      mismatches: 0,
    },
    inFlight: 0,
    maxInFlight: 0,
    timeline: [],
  };
}

/** Records the outcome of one arrival (once). */
export function settle(stats: FaultStats, arrival: Arrival, outcome: string): void {
  if (arrival.outcome !== undefined) return;
  arrival.outcome = outcome;
  const r = (stats.byRoute[arrival.route] ??= { requests: 0, byOutcome: {} });
  r.byOutcome[outcome] = (r.byOutcome[outcome] ?? 0) + 1;
}
