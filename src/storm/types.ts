import type { Clock, Usage } from "../index.ts";
import type { Draws } from "./draws.ts";
import type { Metrics } from "./metrics.ts";
import type { TriggerSpec } from "./scenarios.ts";

/** What a provider reports as it works: arrivals, rejections, occupancy, billing. */
export interface ProviderMeter {
  /** A request arrived at `ms`. */
  arrival(ms: number): void;
  /** A request was turned away at `ms`, and why. */
  rejected(ms: number, reason: RejectReason): void;
  /** How many requests were being served and queued at `ms`. */
  inService(ms: number, inService: number, queued: number): void;
  /** A request that arrived at `arrivedMs` was answered, with this usage. */
  served(arrivedMs: number, usage: Usage): void;
}

/** What the simulated provider and tool share: time, the trouble, randomness, the meters. */
export interface World {
  readonly clock: Clock;
  readonly trigger: TriggerSpec;
  /** What befalls each arrival of a request, drawn from its identity (common random
   * numbers: the same call meets the same fate under every stack). */
  readonly draws: Draws;
  readonly metrics: Metrics;
  /** Where the provider reports (the primary: `metrics`; a fallback: its own meter). */
  readonly meter: ProviderMeter;
}

/** Why the simulated provider refused a request. */
export type RejectReason = "overflow" | "injected" | "rate" | "quota";

/** One model request as the simulated provider sees it. */
export interface SimRequest {
  /** The logical call it belongs to, the same under every stack: each of its attempts meets
   * the provider's draws for that call's n-th arrival. */
  readonly id?: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** The API key the conversation's requests carry (a spent quota is per key). */
  readonly key?: number;
  /** Hears the headers of every answer, errors too (what a fetch layer sees). */
  readonly onHeaders?: (headers: Record<string, string>) => void;
  /** Hears the answer's first token (a stream's first content). */
  readonly onFirstToken?: () => void;
}

/** What a provider error looks like in the storm: an SDK-shaped HTTP error. */
export class SimHttpError extends Error {
  override name = "SimHttpError";
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly error: { type: string; code: string };

  constructor(
    status: number,
    reason: RejectReason,
    retryAfterS?: number,
    headers: Record<string, string> = {},
  ) {
    // A simulated answer has no stack worth keeping, and capturing one for each of the
    // storm's hundreds of thousands of rejections is most of what they cost.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(
      reason === "quota"
        ? "You exceeded your current quota, please check your plan and billing details."
        : `simulated ${status} (${reason})`,
    );
    Error.stackTraceLimit = limit;
    this.status = status;
    this.headers =
      retryAfterS === undefined ? headers : { ...headers, "retry-after": String(retryAfterS) };
    const type =
      reason === "quota"
        ? "insufficient_quota"
        : status === 529
          ? "overloaded_error"
          : status === 429
            ? "rate_limit_error"
            : "api_error";
    this.error = { type, code: type };
  }
}

/** The simulated provider, as a stack calls it. */
export interface SimProviderApi {
  /** Sends one request. `signal` is the client giving up: the provider never learns of it
   * (a request abandoned on timeout still occupies it until it finishes). */
  call(request: SimRequest, signal?: AbortSignal): Promise<Usage>;
}

/** The dependency behind a tool, for the tool scenario. */
export interface SimToolApi {
  /** Performs (or replays, with a key) one side effect. `order` names the turn's charge,
   * the same under every stack. */
  call(
    args: { order: number },
    options: { idempotencyKey?: string; signal?: AbortSignal },
  ): Promise<{ executionId: number; replayed: boolean }>;
}

/** What a turn shares between its calls: a place for a stack's per-turn objects (a Run). */
export interface TurnInfo {
  readonly id: number;
  readonly startedAt: number;
  readonly patienceMs: number;
  readonly state: Map<string, unknown>;
}

/** What a stack is built with: the simulation's clock and randomness, the provider, the tool and a fallback provider. */
export interface StackContext {
  readonly clock: Clock;
  /** [0, 1), seeded: use it for every jitter. */
  readonly random: () => number;
  readonly provider: SimProviderApi;
  readonly tool: SimToolApi;
  /** A second, independent provider for stacks that fall back to one. */
  readonly fallback: SimProviderApi;
  /** The app's per-attempt timeout when the scenario sets one (every stack is given the
   * same); undefined: each stack keeps its own default. */
  readonly attemptTimeoutMs?: number | undefined;
}

/** What a stack gives the simulated users: its way of calling the model and the tool. */
export interface StackClient {
  /** One logical model call. `signal` aborts when the user gives up (if the stack wires it). */
  model(
    request: SimRequest,
    options: { signal?: AbortSignal; turn: TurnInfo; subagent?: number },
  ): Promise<Usage>;
  /** One logical tool call (the payment in the tool scenario). Resolves to whether it
   * reported success to the agent. */
  tool?(
    args: { order: number },
    options: { signal?: AbortSignal; turn: TurnInfo },
  ): Promise<boolean>;
}

/** A retry stack to compare. Built-ins cite where each number comes from. */
export interface StormStack {
  readonly name: string;
  readonly description: string;
  /** Whether the user's giving up reaches the in-flight calls (an AbortSignal wired through). */
  readonly propagatesCancel: boolean;
  /** Whether it sends calls to the second provider (`StackContext.fallback`) too: the
   * report compares such stacks with each other, apart from those with one upstream. */
  readonly fallback?: boolean;
  /** Whether its calls run inside a durable engine's steps (an engine's own retry as the
   * outer layer): the report compares such stacks with each other. */
  readonly engine?: boolean;
  /** Builds the stack's client for one simulation. */
  create(context: StackContext): StackClient;
}
