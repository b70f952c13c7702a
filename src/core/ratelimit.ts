import { readHeader } from "./headers.ts";
import { parseResetValue } from "./retry-after.ts";

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

/** Where each provider puts each number: [dimension, limit, remaining, reset]. */
const SOURCES: readonly [Dimension, string, string, string][] = [
  // OpenAI, Azure OpenAI, Groq and other OpenAI-compatible servers; resets "6m0s", "1s", "120ms".
  [
    "requests",
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
  ],
  [
    "tokens",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
  ],
  // Anthropic; resets are RFC 3339 instants.
  [
    "requests",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
  ],
  [
    "tokens",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
  ],
  [
    "inputTokens",
    "anthropic-ratelimit-input-tokens-limit",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
  ],
  [
    "outputTokens",
    "anthropic-ratelimit-output-tokens-limit",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
  ],
  // Mistral: per-minute windows (no reset header: the minute).
  ["requests", "x-ratelimit-limit-req-minute", "x-ratelimit-remaining-req-minute", ""],
  ["tokens", "x-ratelimit-limit-tokens-minute", "x-ratelimit-remaining-tokens-minute", ""],
  // OpenRouter and the common X-RateLimit-* trio; the reset is an epoch instant (s or ms).
  ["requests", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"],
];

/** Azure's second spelling of the token reset (seconds). */
const AZURE_TOKEN_RESET = "x-rate-limit-reset-tokens";
const AZURE_REQUEST_RESET = "x-rate-limit-reset-requests";

const count = (v: string | undefined): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v.trim().replaceAll(",", ""));
  return Number.isFinite(n) && n >= 0 ? n : undefined;
};

/** A reset as a duration ("6m0s", "55"), an RFC 3339 instant, or an epoch in s or ms. */
function resetAt(v: string | undefined, nowMs: number, epoch: boolean): number | undefined {
  if (v === undefined) return undefined;
  const t = v.trim();
  if (epoch && /^\d{10,13}$/.test(t)) {
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

const anthropicSplit = (headers: unknown) =>
  readHeader(headers, "anthropic-ratelimit-input-tokens-limit") !== undefined ||
  readHeader(headers, "anthropic-ratelimit-output-tokens-limit") !== undefined;

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
  for (const [dim, limitH, remainingH, resetH] of SOURCES) {
    if (out[dim] !== undefined) continue; // the first provider that speaks wins
    const limit = count(readHeader(headers, limitH));
    const remaining = count(readHeader(headers, remainingH));
    let reset = resetH
      ? resetAt(readHeader(headers, resetH), nowMs, resetH === "x-ratelimit-reset")
      : undefined;
    if (reset === undefined && dim === "tokens")
      reset = resetAt(readHeader(headers, AZURE_TOKEN_RESET), nowMs, false);
    if (reset === undefined && dim === "requests")
      reset = resetAt(readHeader(headers, AZURE_REQUEST_RESET), nowMs, false);
    if (limit === undefined && remaining === undefined && reset === undefined) continue;
    // Anthropic's "tokens" is the most restrictive of its input and output limits, not
    // their sum: with those two known, it would only double-count.
    if (limitH.startsWith("anthropic-ratelimit-tokens") && anthropicSplit(headers)) continue;
    out[dim] = {
      ...(limit !== undefined && { limit }),
      ...(remaining !== undefined && { remaining }),
      ...(reset !== undefined && { resetAtMs: reset }),
    };
  }
  return out;
}
