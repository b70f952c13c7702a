import { opt, parseOptions, type Rule } from "../../internal.ts";
import type { AgentScript } from "./agent.ts";
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
  | "bad_request"
  | "content_filter";
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
  "content_filter",
];

/** How a stream goes wrong: after some chunks, a stall, a cut or an in-band error. */
export interface StreamFault {
  /** Content chunks sent before the fault. */
  after: number;
  /** "stall": send nothing more; "cut": drop the connection; "error": an in-band error
   * event; "garbage": an event whose data is not JSON (a proxy's page, a broken encoder),
   * then the end of the body; "end": end the body cleanly with no end of the answer (no
   * `[DONE]`, no finish event). */
  action: "stall" | "cut" | "error" | "garbage" | "end";
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
  /** Answer this HTTP status in the provider's own error shape. A 2xx with `error` (a JSON
   * request): that error's body under the 2xx, as gateways and some providers send it. */
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
  /** Streams: send `after` chunks, then stall, cut or send an error event. A JSON answer
   * under a `stall` or `cut` sends its headers and the first bytes of its body, then stalls
   * or drops the connection (`after` does not count there; `error` leaves it whole). */
  stream?: StreamFault;
  /** Destroy the connection before answering anything. */
  reset?: boolean;
  /** Tools: do the side effect even though the answer is an error (`status`). */
  afterWork?: boolean;
  /** Tools: the side effect takes this long (a repeat meanwhile gets a 409). */
  workMs?: number;
  /** The answer's text (default: the script's `text`); "": none, only the tool calls. */
  text?: string;
  /** The answer stops at the token limit (OpenAI "length", Anthropic "max_tokens", Gemini
   * "MAX_TOKENS", the Responses API "incomplete"). */
  finish?: "length";
  /** OpenAI chat: the model refuses, with this text (`message.refusal`, no content). */
  refusal?: string;
  /** The model the answer names (a dated snapshot of the one asked for, a router's pick).
   * Default: the one asked for. */
  servedBy?: string;
  /** Streams: tool calls after the text (OpenAI chat and Responses, Anthropic), their arguments sent in
   * pieces of 8 characters, each piece a chunk that `stream.after` counts. */
  toolCalls?: { name: string; arguments: string; id?: string }[];
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
  /** The OpenAI chat route plays an agent's model: it calls the tool until the
   * conversation holds `calls` tool results, then answers with them. */
  agent?: AgentScript;
}

const status = opt.int({ min: 100, max: 599, allowed: "an HTTP status from 100 to 599" });
const text = opt.str();
const flag = opt.bool();
const seconds = (min: number, max: number) => opt.num({ min, max });

/** The one table of a stream fault's fields. */
const STREAM = {
  after: opt.int({ default: 0 }),
  action: opt.oneOf(["stall", "cut", "error", "garbage", "end"] as const),
  error: opt.oneOf(ERROR_NAMES),
  keepaliveMs: seconds(10, 60_000),
};

/** The one table of a rule's fields: matching and answer. */
const RULE = {
  route: opt.oneOf(ROUTES),
  tool: text,
  model: text,
  requests: opt.pair({ min: 1 }),
  window: opt.pair({ min: 0 }),
  probability: seconds(0, 1),
  times: opt.int({ min: 1 }),
  status,
  error: opt.oneOf(ERROR_NAMES),
  message: text,
  retryAfter: seconds(0, 10_000_000),
  retryAfterDate: seconds(-10_000_000, 10_000_000),
  retryAfterMs: seconds(0, 10_000_000_000),
  shouldRetry: flag,
  headersDelayMs: seconds(0, 3_600_000),
  tokenLatencyMs: seconds(0, 60_000),
  stream: opt.record(STREAM),
  reset: flag,
  afterWork: flag,
  workMs: seconds(0, 3_600_000),
  // "" is an answer of tool calls only.
  text: opt.any<string>((x) => typeof x === "string", 'a string ("": no text, only tool calls)'),
  toolCalls: opt.list(opt.object({ name: text, arguments: text, id: text })),
  finish: opt.oneOf(["length"] as const),
  refusal: text,
  servedBy: text,
};

const rule: Rule<FaultRule> = (v, at, x) => {
  const r = parseOptions(v, RULE, x, at);
  if (r.stream && r.stream.action === undefined)
    v.fail(`${at}.stream.action`, undefined, 'one of "stall", "cut", "error", "garbage", "end"');
  if (r.afterWork && r.route !== "tools")
    v.fail(`${at}.afterWork`, true, 'used only with route "tools"');
  return r as FaultRule;
};

const SCRIPT = {
  seed: opt.int({ default: 1 }),
  text: opt.str(),
  rules: opt.list(rule),
  capacity: opt.record({
    maxConcurrent: opt.int({ min: 1 }),
    maxPerSecond: opt.int({ min: 1 }),
    status,
    retryAfter: seconds(0, 86_400),
  }),
  checkpoints: flag,
  agent: opt.record({ tool: opt.str(), calls: opt.int({ min: 0, max: 100 }) }),
  rateLimit: opt.record({
    requestsPerMinute: opt.int({ min: 1 }),
    tokensPerMinute: opt.int({ min: 1 }),
    windowMs: opt.int({ min: 100 }),
  }),
};

/** Validates a script (from JSON or code) with errors that name the bad field. */
export function parseScript(
  input: unknown,
): Required<Pick<FaultScript, "seed" | "text" | "rules">> & FaultScript {
  const s = parseOptions("fault script", SCRIPT, input);
  return {
    ...(s as FaultScript),
    seed: s.seed,
    text: s.text ?? "The fault server says hello, one word at a time.",
    rules: s.rules ?? [],
  };
}
