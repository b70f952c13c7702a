import type { Price } from "../index.ts";
import type { Arrival } from "./arrivals.ts";

/** The simulated provider: its capacity and latency. */
export interface ProviderSpec {
  /** Requests in service at once. */
  maxConcurrent: number;
  /** Requests waiting behind them; beyond that, overflow is rejected. */
  maxQueue: number;
  /** Service time: ttft + output × perOutputToken + input × perInputToken (ms). */
  ttftMs: number;
  perOutputTokenMs: number;
  perInputTokenMs: number;
  /** The status an overflow gets (503, 529 or 429). */
  overflowStatus: number;
  /** How long a rejection takes to arrive. */
  rejectLatencyMs: number;
  /** Retry-After (seconds) sent with rejections, if any. */
  retryAfterS?: number;
  /** Where a request waits before it starts (a cold or busy replica's queue): a wait drawn
   * from a lognormal (median `medianMs`, spread `sigma`), and for a share `slowShare` of
   * requests `slowMs` more. Nothing is billed and no capacity is held while it waits; a
   * request its client abandons there never starts. */
  queueTail?: { medianMs: number; sigma: number; slowShare: number; slowMs: number };
}

/** The trouble: a window in which the provider fails a share of requests, slows down, or
 * loses capacity. */
export interface TriggerSpec {
  startS: number;
  endS: number;
  /** More than one trouble window: the trouble holds in each [startS, endS) given, and the
   * scenario's `startS` and `endS` are the first start and the last end (what is measured
   * "after the trigger" follows the last). */
  windows?: readonly (readonly [number, number])[];
  errorRate?: number;
  errorStatus?: number;
  latencyFactor?: number;
  capacityFactor?: number;
  /** A rate limit: `perWindow` requests per `windowS`, as a token bucket replenished
   * continuously (as Anthropic documents its limits and OpenAI enforces its RPM); beyond
   * it a 429 with Retry-After until one request is back. Every answer carries OpenAI's
   * `x-ratelimit-*-requests` headers. Outside the trigger the limit is `usualPerWindow`
   * (the key's own tier, before others share it). A share `quotaShare` of the keys gets a
   * 429 `insufficient_quota` during the trigger (a spent key). */
  rateLimit?: { perWindow: number; windowS: number; usualPerWindow?: number; quotaShare?: number };
}

/** Whether `ms` (virtual time) falls inside the trigger (one of its windows, if it has several). */
export function inTrigger(trigger: TriggerSpec, ms: number): boolean {
  if (ms < trigger.startS * 1000 || ms >= trigger.endS * 1000) return false;
  const w = trigger.windows;
  if (w === undefined) return true;
  for (const [a, b] of w) if (ms >= a * 1000 && ms < b * 1000) return true;
  return false;
}

/** The simulated users: how many, how they arrive, their patience. */
export interface UsersSpec {
  /** Conversations running at once when the provider is healthy. New ones arrive at the
   * rate that keeps this many running (open loop): arrivals do not wait for the provider. */
  conversations: number;
  turnsPerConversation: number;
  modelCallsPerTurn: number;
  /** Tool scenario: payment calls per turn. */
  toolCallsPerTurn: number;
  /** Fan-out: after the turn's first model call, this many subagent calls at once (each
   * a child run of the turn's run); the turn goes on when all have answered. */
  subagentsPerTurn?: number;
  thinkS: [number, number];
  /** A user stops waiting for a turn after this long. */
  patienceS: number;
  /** Input tokens grow with the conversation's depth: base + perCall × calls so far. */
  inputTokens: { base: number; perCall: number; max: number };
  outputTokens: [number, number];
}

/** The payment dependency of the tool scenario. */
export interface ToolSpec {
  /** Time the dependency takes to execute a charge. */
  latencyMs: number;
  /** During the trigger, the share of calls answered 503 before any work. */
  errorRate: number;
  /** During the trigger, the share of calls that execute but answer only after this long
   * (a client timeout then cannot know the charge went through). */
  slowRate: number;
  slowMs: number;
}

/** One scenario: the users, the provider and the trouble. */
export interface Scenario {
  name: string;
  title: string;
  /** The source document it reproduces. */
  source: string;
  durationS: number;
  provider: ProviderSpec;
  /** The app's per-attempt timeout, given to every stack (as teams set one for interactive
   * agents); absent: each stack keeps its own default. */
  attemptTimeoutS?: number;
  trigger: TriggerSpec;
  users: UsersSpec;
  /** Replayed requests (a real trace, or your own log): each a turn of one call at its time
   * with its own tokens, in place of the users' conversations (their patience still holds). */
  arrivals?: readonly Arrival[];
  tool?: ToolSpec;
  prices: Price;
}

/** A Sonnet-class price: $3 per million input tokens, $15 per million output. */
const PRICES: Price = { inputPerMillion: 3, outputPerMillion: 15 };

/** ~2.2 s per call (400 ms + 8 ms per output token + a little per input token). 200
 * conversations make ~48 calls/s, ~104 in service: 80% of this provider's capacity. */
const PROVIDER: ProviderSpec = {
  maxConcurrent: 130,
  maxQueue: 60,
  ttftMs: 400,
  perOutputTokenMs: 8,
  perInputTokenMs: 0.02,
  overflowStatus: 503,
  rejectLatencyMs: 50,
};

const USERS: UsersSpec = {
  conversations: 200,
  turnsPerConversation: 5,
  modelCallsPerTurn: 4,
  toolCallsPerTurn: 0,
  thinkS: [5, 15],
  patienceS: 90,
  inputTokens: { base: 1_500, perCall: 700, max: 24_000 },
  outputTokens: [100, 300],
};

/** The built-in scenarios, each with its source. */
export const SCENARIOS: Record<string, Scenario> = {
  "outage-503": {
    name: "outage-503",
    title: "Ten minutes in which half the requests fail with 503",
    source: "worked example W1: a 503 storm",
    durationS: 840,
    provider: PROVIDER,
    // Half the fleet is down: half the requests fail fast with 503, the other half share
    // what capacity is left, and load beyond it fails too.
    trigger: { startS: 60, endS: 660, errorRate: 0.5, errorStatus: 503, capacityFactor: 0.5 },
    users: USERS,
    prices: PRICES,
  },
  "tool-deploy": {
    name: "tool-deploy",
    title: "A payment tool's dependency answers 503 for 30 s during a deploy",
    source: "worked example W2: a payment tool during a deploy",
    durationS: 240,
    provider: PROVIDER,
    trigger: { startS: 60, endS: 90 },
    // Each turn charges once. During the deploy 90% of charges are refused with 503 before
    // any work; 10% go through but answer only after 5 s, past a 3 s attempt timeout.
    users: { ...USERS, modelCallsPerTurn: 2, toolCallsPerTurn: 1 },
    tool: { latencyMs: 300, errorRate: 0.9, slowRate: 0.1, slowMs: 5_000 },
    prices: PRICES,
  },
  degradation: {
    name: "degradation",
    title: "90 s in which latency triples and 20% of requests get 529, near capacity",
    source: "worked example W3: ninety seconds of provider degradation",
    durationS: 600,
    // W3's agent works tickets in the background (patience 5 min) and makes long calls (~17 s: 400–1 200 output tokens at 20 ms each) under
    // a 60 s timeout. ~10.6 calls/s keep ~178 in service: 90% of this provider. Under load
    // it queues rather than rejects, up to about a minute of degraded throughput (latency
    // climbs, as real providers' does), and it keeps serving requests whose clients gave up.
    provider: {
      ...PROVIDER,
      perOutputTokenMs: 20,
      maxConcurrent: 198,
      maxQueue: 1_000,
      overflowStatus: 529,
    },
    trigger: { startS: 60, endS: 150, errorRate: 0.2, errorStatus: 529, latencyFactor: 3 },
    users: { ...USERS, outputTokens: [400, 1_200], patienceS: 300 },
    prices: PRICES,
  },
  metastable: {
    name: "metastable",
    title:
      "30 s in which latency triples, under an app's 6 s timeout: does the trouble outlive it?",
    source:
      "metastable failures (Bronson et al., HotOS 2021; Huang et al., OSDI 2022): a trigger, then retries sustain it",
    durationS: 300,
    // The same provider with a deeper queue: a full one is 5 s of waiting. Requests whose
    // clients timed out are still served, so once the queue is full of them every attempt
    // waits longer than the app's 6 s timeout, fails, and is retried into the same queue.
    provider: { ...PROVIDER, maxQueue: 300 },
    attemptTimeoutS: 6,
    trigger: { startS: 60, endS: 90, latencyFactor: 3 },
    // One call per turn, so a failed call does not lighten a turn: the arrivals of calls
    // stay open-loop (~47/s, 80% of the provider), as in the published models.
    users: { ...USERS, conversations: 480, modelCallsPerTurn: 1 },
    prices: PRICES,
  },
  "rate-limit": {
    name: "rate-limit",
    title: "Two minutes of 429s from a spent rate limit (Retry-After), and a few spent keys",
    source:
      "a rate-limit storm: RPM limits answered with 429 and Retry-After, some insufficient_quota",
    durationS: 240,
    provider: PROVIDER,
    // The limit falls to 60% of the usual load (29 requests a second, a burst of 290);
    // beyond it a 429 with Retry-After; 3% of the conversations use a key whose quota is
    // spent. Before and after, the key's own limit (120 a second) is never reached.
    trigger: {
      startS: 60,
      endS: 180,
      rateLimit: { perWindow: 290, windowS: 10, usualPerWindow: 1200, quotaShare: 0.03 },
    },
    users: USERS,
    prices: PRICES,
  },
  "fan-out": {
    name: "fan-out",
    title:
      "Agents fan out to 4 parallel subagents per turn; for two minutes the rate limit falls to 60%",
    source:
      "parallel agent calls exhausting API rate limits: a planner call, 4 subagents at once, a merge call",
    durationS: 240,
    provider: PROVIDER,
    // 120 conversations, 6 calls a turn (plan, 4 subagents side by side, merge): ~49
    // calls/s, as the other scenarios. The limit falls as in rate-limit, without spent keys.
    trigger: {
      startS: 60,
      endS: 180,
      rateLimit: { perWindow: 290, windowS: 10, usualPerWindow: 1200 },
    },
    users: { ...USERS, conversations: 120, modelCallsPerTurn: 2, subagentsPerTurn: 4 },
    prices: PRICES,
  },
  "tail-latency": {
    name: "tail-latency",
    title: "No errors, but a long tail: a request waits at a replica, 3% of them 20 s",
    source:
      "the tail at scale (Dean and Barroso, CACM 2013): a share of requests meets a cold replica or a deep queue",
    durationS: 240,
    // Before it starts, each request waits at a replica: lognormal with a median of 150 ms
    // and a p99 of 1.5 s (ten times the median), and 3% of them 20 s more (a cold replica).
    // Time to first token is that wait and the prompt's 400 ms; a request cut while it
    // waits is billed nothing. The "trigger" marks the minutes the metrics look at.
    provider: {
      ...PROVIDER,
      queueTail: { medianMs: 150, sigma: 1, slowShare: 0.03, slowMs: 20_000 },
    },
    trigger: { startS: 60, endS: 180 },
    users: USERS,
    prices: PRICES,
  },
  blip: {
    name: "blip",
    title: "5 s of 20% errors at light load, where retries should help",
    source: "worked example W4: a short blip, the case retries exist for",
    durationS: 180,
    provider: PROVIDER,
    trigger: { startS: 60, endS: 65, errorRate: 0.2, errorStatus: 503 },
    users: { ...USERS, conversations: 60 },
    prices: PRICES,
  },
};

/** The default eight: what `npm start` and `runStorm()` run (their tables stay comparable
 * from release to release). */
export const SCENARIO_NAMES = Object.keys(SCENARIOS);

/**
 * Built-in scenarios outside the default eight, run when named (`--scenario`): longer, so
 * slower, and asking another question.
 */
export const EXTRA_SCENARIOS: Record<string, Scenario> = {
  "incident-long": {
    name: "incident-long",
    title: "An incident as long as a real one: 80 minutes in which half the requests fail with 503",
    source:
      "the median incident on the inference path of the OpenAI and Anthropic APIs in 2024 lasted 86 and 75 minutes (their status pages); its intensity is outage-503's, assumed",
    durationS: 60 + 4_800 + 180,
    // A quarter of outage-503's users on a quarter of its provider: the same shares of
    // capacity and demand, a quarter of the work for a run five times as long.
    provider: { ...PROVIDER, maxConcurrent: 33, maxQueue: 15 },
    trigger: { startS: 60, endS: 4_860, errorRate: 0.5, errorStatus: 503, capacityFactor: 0.5 },
    users: { ...USERS, conversations: 50 },
    prices: PRICES,
  },
};

/** Every built-in scenario by name: the default eight and the extra ones. */
export const ALL_SCENARIOS: Record<string, Scenario> = { ...SCENARIOS, ...EXTRA_SCENARIOS };
