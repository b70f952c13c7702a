import { readHeader } from "./headers.ts";
import { parseResetValue } from "./retry-after.ts";
import { get, isA } from "./safe.ts";

/** One limit as a provider states it on a response. */
export interface LimitState {
  /** The window's size (requests or tokens per window). */
  readonly limit?: number;
  /** What is left of it now. */
  readonly remaining?: number;
  /** When it is whole again, on the clock of `nowMs`. */
  readonly resetAtMs?: number;
}

/** What a response says of the caller's rate limits, by dimension; a dimension nothing
 * was said of is absent, and a negative number (Azure's -1) reads as unsaid. */
export interface RateLimitState {
  readonly requests?: LimitState;
  readonly tokens?: LimitState;
  readonly inputTokens?: LimitState;
  readonly outputTokens?: LimitState;
}

type Dimension = keyof RateLimitState;

/** How a provider states when a window is whole again. */
type ResetForm =
  /** A duration from now: "6m0s", "1s", "120ms" (OpenAI), seconds (Azure). */
  | "duration"
  /** An RFC 3339 instant (Anthropic). */
  | "instant"
  /** An epoch in seconds or milliseconds (OpenRouter's X-RateLimit-Reset). */
  | "epoch"
  /** Not said: the window's own length. */
  | "none";

/** Where a provider puts each number of one limit. */
interface Source {
  readonly dim: Dimension;
  readonly limit: string;
  readonly remaining: string;
  readonly reset: readonly string[];
  readonly form: ResetForm;
}

const openai = (dim: Dimension, what: string): Source => ({
  dim,
  limit: `x-ratelimit-limit-${what}`,
  remaining: `x-ratelimit-remaining-${what}`,
  // Azure OpenAI also spells it x-rate-limit-reset-* (seconds).
  reset: [`x-ratelimit-reset-${what}`, `x-rate-limit-reset-${what}`],
  form: "duration",
});
const anthropic = (dim: Dimension, what: string): Source => ({
  dim,
  limit: `anthropic-ratelimit-${what}-limit`,
  remaining: `anthropic-ratelimit-${what}-remaining`,
  reset: [`anthropic-ratelimit-${what}-reset`],
  form: "instant",
});

/** The one table of the headers providers state their rate limits in: OpenAI, Azure
 * OpenAI, Groq and other OpenAI-compatible servers; Anthropic; Mistral's per-minute
 * windows; OpenRouter and the common X-RateLimit-* trio. The first that speaks wins. */
const SOURCES: readonly Source[] = [
  openai("requests", "requests"),
  openai("tokens", "tokens"),
  anthropic("requests", "requests"),
  anthropic("tokens", "tokens"),
  anthropic("inputTokens", "input-tokens"),
  anthropic("outputTokens", "output-tokens"),
  {
    dim: "requests",
    limit: "x-ratelimit-limit-req-minute",
    remaining: "x-ratelimit-remaining-req-minute",
    reset: [],
    form: "none",
  },
  {
    dim: "tokens",
    limit: "x-ratelimit-limit-tokens-minute",
    remaining: "x-ratelimit-remaining-tokens-minute",
    reset: [],
    form: "none",
  },
  {
    dim: "requests",
    limit: "x-ratelimit-limit",
    remaining: "x-ratelimit-remaining",
    reset: ["x-ratelimit-reset"],
    form: "epoch",
  },
];

/** The resets given as a duration from now: a 429's wait hint when it has no Retry-After. */
const DURATION_RESETS = SOURCES.filter((s) => s.form === "duration").flatMap((s) => s.reset);

/**
 * When the exhausted rate-limit window refills (Azure OpenAI, OpenAI): a wait hint for a
 * 429 that carries no Retry-After. Which window ran out is not said, so the later of those
 * given: both are free by then.
 */
export function parseRateLimitReset(headers: unknown): number | undefined {
  let hint: number | undefined;
  const read = readerOf(headers);
  for (const name of DURATION_RESETS) {
    const raw = read(name);
    const ms = raw === undefined ? undefined : parseResetValue(raw);
    if (ms !== undefined) hint = Math.max(hint ?? 0, ms);
  }
  return hint;
}

const count = (v: string | undefined): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v.trim().replaceAll(",", ""));
  return Number.isFinite(n) && n >= 0 ? n : undefined;
};

/** A reset in one of the forms, as a time on the clock of `nowMs`. */
function resetAt(v: string | undefined, nowMs: number, form: ResetForm): number | undefined {
  if (v === undefined) return undefined;
  const t = v.trim();
  if (form === "epoch" && /^\d{10,13}$/.test(t)) {
    const n = Number(t);
    return n < 1e12 ? n * 1000 : n; // seconds or milliseconds since the epoch
  }
  if (/^\d{4}-\d{2}-\d{2}T/.test(t)) {
    const at = Date.parse(t);
    return Number.isFinite(at) ? at : undefined;
  }
  const ms = parseResetValue(t);
  return ms === undefined ? undefined : nowMs + ms;
}

/** Reads one header of a bag by its lower-case name. */
type Read = (name: string) => string | undefined;

/** The first reset of `source` that reads. */
function firstReset(read: Read, source: Source, nowMs: number): number | undefined {
  for (const name of source.reset) {
    const at = resetAt(read(name), nowMs, source.form);
    if (at !== undefined) return at;
  }
  return undefined;
}

const anthropicSplit = (read: Read) =>
  read("anthropic-ratelimit-input-tokens-limit") !== undefined ||
  read("anthropic-ratelimit-output-tokens-limit") !== undefined;

const RATE_NAME = /rate-?limit/i;

/**
 * The bag's rate-limit headers, read in one pass: a response has a few dozen headers, and
 * asking a fetch `Headers` for each of the table's thirty names costs more than walking it
 * once. Undefined when the bag cannot be walked (each name is then asked for).
 */
function gather(headers: unknown): Map<string, string> | undefined {
  if (headers === null || typeof headers !== "object") return undefined;
  const out = new Map<string, string>();
  try {
    // A fetch Headers (what an answer carries); anything else is asked name by name.
    if (isA(headers, Map)) return undefined;
    const each = get(headers, "forEach");
    if (typeof each !== "function" || typeof get(headers, "get") !== "function") return undefined;
    each.call(headers, (value: unknown, key: unknown) => {
      if (typeof key === "string" && typeof value === "string" && RATE_NAME.test(key))
        out.set(key.toLowerCase(), value);
    });
  } catch {
    return undefined;
  }
  return out;
}

/** A reader of `headers`: from one pass over them where they can be walked. */
function readerOf(headers: unknown): Read {
  const all = gather(headers);
  return all === undefined ? (name) => readHeader(headers, name) : (name) => all.get(name);
}

/**
 * Reads a response's rate-limit headers, from OpenAI, Azure OpenAI, Anthropic, Groq,
 * Mistral, OpenRouter and servers that copy them. Total like `parseRetryAfter`: it never
 * throws and never returns NaN; unknown forms are ignored, and a dimension nothing was
 * said of is absent.
 */
export function parseRateLimitHeaders(
  headers: unknown,
  nowMs: number = Date.now(),
): RateLimitState {
  if (!Number.isFinite(nowMs)) nowMs = Date.now();
  const out: { -readonly [K in Dimension]?: LimitState } = {};
  const all = gather(headers);
  if (all !== undefined && all.size === 0) return out; // nothing said of limits
  const read: Read = all === undefined ? (name) => readHeader(headers, name) : (n) => all.get(n);
  for (const source of SOURCES) {
    const dim = source.dim;
    if (out[dim] !== undefined) continue; // the first provider that speaks wins
    const limit = count(read(source.limit));
    const remaining = count(read(source.remaining));
    const reset = firstReset(read, source, nowMs);
    if (limit === undefined && remaining === undefined && reset === undefined) continue;
    // Anthropic's "tokens" is the most restrictive of its input and output limits, not
    // their sum: with those two known, it would only double-count.
    if (source.limit === "anthropic-ratelimit-tokens-limit" && anthropicSplit(read)) continue;
    out[dim] = {
      ...(limit !== undefined && { limit }),
      ...(remaining !== undefined && { remaining }),
      ...(reset !== undefined && { resetAtMs: reset }),
    };
  }
  return out;
}
