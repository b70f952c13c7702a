import { ConfigError } from "../../index.ts";
import { type Field, flag, int, list, num, oneOf, pair, record, text } from "./check.ts";
import type { RateLimitScript } from "./ratelimit.ts";

/** The fault server's routes: the three providers and the tool endpoint. */
export type Route = "openai" | "anthropic" | "gemini" | "tools";
export const ROUTES: readonly Route[] = ["openai", "anthropic", "gemini", "tools"];

/** Named provider errors, for statuses that mean more than one thing. */
export type ErrorName =
  | "context_length"
  | "insufficient_quota"
  | "rate_limit"
  | "overloaded"
  | "auth"
  | "permission"
  | "not_found"
  | "timeout"
  | "conflict"
  | "server_error"
  | "bad_request";
export const ERROR_NAMES: readonly ErrorName[] = [
  "context_length",
  "insufficient_quota",
  "rate_limit",
  "overloaded",
  "auth",
  "permission",
  "not_found",
  "timeout",
  "conflict",
  "server_error",
  "bad_request",
];

/** How a stream goes wrong: after some chunks, a stall, a cut or an in-band error. */
export interface StreamFault {
  /** Content chunks sent before the fault. */
  after: number;
  /** "stall": send nothing more; "cut": drop the connection; "error": an in-band error event. */
  action: "stall" | "cut" | "error";
  /** The in-band error's name (default "overloaded"). */
  error?: ErrorName;
  /** "stall": keep the connection warm with the provider's keepalive (Anthropic's `ping`
   * event, an SSE comment elsewhere) every this many ms, as a stalled provider does. */
  keepaliveMs?: number;
}

/**
 * One rule: when it matches a request, it shapes the answer. Matching: `route` (and
 * `tool` for the tool endpoint), `model`, `requests` ([from, to], 1-based, counted per
 * route), `window` ([fromMs, toMs) since the script was set), `probability` (seeded),
 * `times` (applies at most this often). The first matching rule wins.
 */
export interface FaultRule {
  route?: Route;
  tool?: string;
  model?: string;
  requests?: [number, number];
  window?: [number, number];
  probability?: number;
  times?: number;
  /** Answer this HTTP status in the provider's own error shape. */
  status?: number;
  error?: ErrorName;
  message?: string;
  /** Retry-After as delay-seconds. */
  retryAfter?: number;
  /** Retry-After as an IMF-fixdate this many seconds from now. */
  retryAfterDate?: number;
  /** retry-after-ms (OpenAI, Anthropic). */
  retryAfterMs?: number;
  shouldRetry?: boolean;
  /** Wait this long before sending headers. */
  headersDelayMs?: number;
  /** Per output token (streams: per chunk). */
  tokenLatencyMs?: number;
  /** Streams: send `after` chunks, then stall, cut or send an error event. */
  stream?: StreamFault;
  /** Destroy the connection before answering anything. */
  reset?: boolean;
  /** Tools: do the side effect even though the answer is an error (`status`). */
  afterWork?: boolean;
  /** Tools: the side effect takes this long (a repeat meanwhile gets a 409). */
  workMs?: number;
  /** The answer's text (default: the script's `text`). */
  text?: string;
  /** The answer stops at the token limit (OpenAI "length", Anthropic "max_tokens", Gemini
   * "MAX_TOKENS", the Responses API "incomplete"). */
  finish?: "length";
  /** OpenAI chat: the model refuses, with this text (`message.refusal`, no content). */
  refusal?: string;
  /** Streams: tool calls after the text (OpenAI chat, Anthropic), their arguments sent in
   * pieces of 8 characters, each piece a chunk that `stream.after` counts. */
  toolCalls?: { name: string; arguments: string }[];
}

/** A capacity limit: requests over it are rejected with a status. */
export interface Capacity {
  maxConcurrent?: number;
  maxPerSecond?: number;
  /** The status an overflow gets. Default 503 (529 on the Anthropic route). */
  status?: number;
  retryAfter?: number;
}

/** What the fault server does: its rules, its healthy text, its capacity and seed. */
export interface FaultScript {
  seed?: number;
  /** The text a healthy answer streams, word by word. */
  text?: string;
  rules?: FaultRule[];
  capacity?: Capacity;
  /** Gemini streams carry a `continuationToken` after every delta, and a request that
   * sends one back resumes after it (Gemini's resumable streams). */
  checkpoints?: boolean;
  /** Per-minute limits on the model routes, as a provider's for one key: every answer
   * carries the provider's rate-limit headers, and a request over a limit gets a 429. */
  rateLimit?: RateLimitScript;
}

const status = int(100, 599, "an HTTP status from 100 to 599");

/** The one table of a rule's fields: matching and answer. */
const RULE = record<FaultRule>({
  route: oneOf(ROUTES),
  tool: text,
  model: text,
  requests: pair(1),
  window: pair(0),
  probability: num(0, 1),
  times: int(1),
  status,
  error: oneOf(ERROR_NAMES),
  message: text,
  retryAfter: num(0, 10_000_000),
  retryAfterDate: num(-10_000_000, 10_000_000),
  retryAfterMs: num(0, 10_000_000_000),
  shouldRetry: flag,
  headersDelayMs: num(0, 3_600_000),
  tokenLatencyMs: num(0, 60_000),
  stream: record<StreamFault>({
    after: int(0),
    action: oneOf(["stall", "cut", "error"] as const),
    error: oneOf(ERROR_NAMES),
    keepaliveMs: num(10, 60_000),
  }),
  reset: flag,
  afterWork: flag,
  workMs: num(0, 3_600_000),
  text,
  toolCalls: list(record<{ name: string; arguments: string }>({ name: text, arguments: text })),
  finish: oneOf(["length"] as const),
  refusal: text,
});

const ruleField: Field<FaultRule> = (x, at, owner) => {
  const rule = RULE(x, at, owner);
  if (rule.stream) rule.stream = { ...rule.stream, after: rule.stream.after ?? 0 };
  if (rule.stream && rule.stream.action === undefined)
    throw new ConfigError(
      owner,
      `${at}.stream.action`,
      undefined,
      'one of "stall", "cut", "error"',
    );
  if (rule.afterWork && rule.route !== "tools")
    throw new ConfigError(owner, `${at}.afterWork`, true, 'used only with route "tools"');
  return rule;
};

const SCRIPT = record<FaultScript>({
  seed: int(0),
  text,
  rules: list(ruleField),
  capacity: record<Capacity>({
    maxConcurrent: int(1),
    maxPerSecond: int(1),
    status,
    retryAfter: num(0, 86_400),
  }),
  checkpoints: flag,
  rateLimit: record<RateLimitScript>({
    requestsPerMinute: int(1),
    tokensPerMinute: int(1),
    windowMs: int(100),
  }),
});

/** Validates a script (from JSON or code) with errors that name the bad field. */
export function parseScript(
  input: unknown,
): Required<Pick<FaultScript, "seed" | "text" | "rules">> & FaultScript {
  const s = SCRIPT(input === undefined ? {} : input, "", "fault script");
  return {
    ...s,
    seed: s.seed ?? 1,
    text: s.text ?? "The fault server says hello, one word at a time.",
    rules: s.rules ?? [],
  };
}
