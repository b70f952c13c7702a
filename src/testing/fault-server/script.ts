import { validator } from "../../core/validate.ts";

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

export interface StreamFault {
  /** Content chunks sent before the fault. */
  after: number;
  /** "stall": send nothing more; "cut": drop the connection; "error": an in-band error event. */
  action: "stall" | "cut" | "error";
  /** The in-band error's name (default "overloaded"). */
  error?: ErrorName;
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
}

export interface Capacity {
  maxConcurrent?: number;
  maxPerSecond?: number;
  /** The status an overflow gets. Default 503 (529 on the Anthropic route). */
  status?: number;
  retryAfter?: number;
}

export interface FaultScript {
  seed?: number;
  /** The text a healthy answer streams, word by word. */
  text?: string;
  rules?: FaultRule[];
  capacity?: Capacity;
}

const RULE_KEYS = [
  "route",
  "tool",
  "model",
  "requests",
  "window",
  "probability",
  "times",
  "status",
  "error",
  "message",
  "retryAfter",
  "retryAfterDate",
  "retryAfterMs",
  "shouldRetry",
  "headersDelayMs",
  "tokenLatencyMs",
  "stream",
  "reset",
  "afterWork",
  "workMs",
  "text",
];

/** Validates a script (from JSON or code) with errors that name the bad field. */
export function parseScript(
  input: unknown,
): Required<Pick<FaultScript, "seed" | "text" | "rules">> & FaultScript {
  const v = validator("fault script");
  const s = v.object("script", input ?? {});
  v.known("", s, ["seed", "text", "rules", "capacity"]);
  const seed = s.seed === undefined ? 1 : v.int("seed", s.seed, 0);
  const text =
    s.text === undefined
      ? "The fault server says hello, one word at a time."
      : str(v, "text", s.text);
  if (s.rules !== undefined && !Array.isArray(s.rules))
    v.fail("rules", s.rules, "an array of rules");
  const rules = ((s.rules as unknown[] | undefined) ?? []).map((r, i) =>
    parseRule(v, `rules[${i}]`, r),
  );
  let capacity: Capacity | undefined;
  if (s.capacity !== undefined) {
    const c = v.object("capacity", s.capacity);
    v.known("capacity", c, ["maxConcurrent", "maxPerSecond", "status", "retryAfter"]);
    capacity = {};
    if (c.maxConcurrent !== undefined)
      capacity.maxConcurrent = v.int("capacity.maxConcurrent", c.maxConcurrent, 1);
    if (c.maxPerSecond !== undefined)
      capacity.maxPerSecond = v.int("capacity.maxPerSecond", c.maxPerSecond, 1);
    if (c.status !== undefined) capacity.status = status(v, "capacity.status", c.status);
    if (c.retryAfter !== undefined)
      capacity.retryAfter = v.num("capacity.retryAfter", c.retryAfter, 0, 86_400);
  }
  return { seed, text, rules, ...(capacity && { capacity }) };
}

type V = ReturnType<typeof validator>;

function str(v: V, name: string, x: unknown): string {
  if (typeof x !== "string" || x === "") v.fail(name, x, "a non-empty string");
  return x as string;
}

function status(v: V, name: string, x: unknown): number {
  const n = v.int(name, x, 100);
  if (n > 599) v.fail(name, x, "an HTTP status from 100 to 599");
  return n;
}

function pair(v: V, name: string, x: unknown, min: number): [number, number] {
  if (!Array.isArray(x) || x.length !== 2) v.fail(name, x, "a pair [from, to]");
  const [a, b] = x as unknown[];
  const from = v.num(`${name}[0]`, a, min);
  const to = v.num(`${name}[1]`, b, from);
  return [from, to];
}

function parseRule(v: V, at: string, input: unknown): FaultRule {
  const r = v.object(at, input);
  v.known(at, r, RULE_KEYS);
  const rule: FaultRule = {};
  if (r.route !== undefined) rule.route = v.oneOf(`${at}.route`, r.route, ROUTES);
  if (r.tool !== undefined) rule.tool = str(v, `${at}.tool`, r.tool);
  if (r.model !== undefined) rule.model = str(v, `${at}.model`, r.model);
  if (r.requests !== undefined) rule.requests = pair(v, `${at}.requests`, r.requests, 1);
  if (r.window !== undefined) rule.window = pair(v, `${at}.window`, r.window, 0);
  if (r.probability !== undefined)
    rule.probability = v.num(`${at}.probability`, r.probability, 0, 1);
  if (r.times !== undefined) rule.times = v.int(`${at}.times`, r.times, 1);
  if (r.status !== undefined) rule.status = status(v, `${at}.status`, r.status);
  if (r.error !== undefined) rule.error = v.oneOf(`${at}.error`, r.error, ERROR_NAMES);
  if (r.message !== undefined) rule.message = str(v, `${at}.message`, r.message);
  if (r.retryAfter !== undefined)
    rule.retryAfter = v.num(`${at}.retryAfter`, r.retryAfter, 0, 10_000_000);
  if (r.retryAfterDate !== undefined)
    rule.retryAfterDate = v.num(`${at}.retryAfterDate`, r.retryAfterDate, -10_000_000, 10_000_000);
  if (r.retryAfterMs !== undefined)
    rule.retryAfterMs = v.num(`${at}.retryAfterMs`, r.retryAfterMs, 0, 10_000_000_000);
  if (r.shouldRetry !== undefined) {
    if (typeof r.shouldRetry !== "boolean")
      v.fail(`${at}.shouldRetry`, r.shouldRetry, "true or false");
    rule.shouldRetry = r.shouldRetry as boolean;
  }
  if (r.headersDelayMs !== undefined)
    rule.headersDelayMs = v.num(`${at}.headersDelayMs`, r.headersDelayMs, 0, 3_600_000);
  if (r.tokenLatencyMs !== undefined)
    rule.tokenLatencyMs = v.num(`${at}.tokenLatencyMs`, r.tokenLatencyMs, 0, 60_000);
  if (r.stream !== undefined) {
    const s = v.object(`${at}.stream`, r.stream);
    v.known(`${at}.stream`, s, ["after", "action", "error"]);
    rule.stream = {
      after: v.int(`${at}.stream.after`, s.after ?? 0, 0),
      action: v.oneOf(`${at}.stream.action`, s.action, ["stall", "cut", "error"] as const),
      ...(s.error !== undefined && { error: v.oneOf(`${at}.stream.error`, s.error, ERROR_NAMES) }),
    };
  }
  for (const flag of ["reset", "afterWork"] as const) {
    if (r[flag] !== undefined) {
      if (typeof r[flag] !== "boolean") v.fail(`${at}.${flag}`, r[flag], "true or false");
      rule[flag] = r[flag] as boolean;
    }
  }
  if (r.workMs !== undefined) rule.workMs = v.num(`${at}.workMs`, r.workMs, 0, 3_600_000);
  if (r.text !== undefined) rule.text = str(v, `${at}.text`, r.text);
  if (rule.afterWork && rule.route !== "tools")
    v.fail(`${at}.afterWork`, true, 'used only with route "tools"');
  return rule;
}
