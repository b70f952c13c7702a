import type { Route } from "./script.ts";

/** Per-minute limits the fault server enforces, as a provider does for one key. */
export interface RateLimitScript {
  requestsPerMinute?: number;
  /** Input tokens plus the output allowance (`max_tokens`), as OpenAI counts its TPM. */
  tokensPerMinute?: number;
  /** The window the limits refill over: a minute, as providers count; shorter to see a
   * limit refill within a test. @default 60000 */
  windowMs?: number;
}

/** A bucket refilled continuously: `limit` over a minute. */
class Bucket {
  readonly limit: number;
  readonly window: number;
  level: number;
  at: number;
  constructor(limit: number, window: number, now: number) {
    this.limit = limit;
    this.window = window;
    this.level = limit;
    this.at = now;
  }
  refill(now: number) {
    this.level = Math.min(this.limit, this.level + ((now - this.at) * this.limit) / this.window);
    this.at = now;
  }
  /** Ms until `n` is back (0 when it is). */
  waitFor(n: number): number {
    return this.level >= n ? 0 : ((n - this.level) * this.window) / this.limit;
  }
  /** Ms until the bucket is full again. */
  get resetMs(): number {
    return ((this.limit - this.level) * this.window) / this.limit;
  }
}

/** A duration as OpenAI writes its resets: "6m0s", "1s", "120ms". */
function duration(ms: number): string {
  if (ms < 1000) return `${Math.ceil(ms)}ms`;
  const s = Math.ceil(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

/** What one request is told: whether it is over the limit, and the headers every answer
 * carries (OpenAI's `x-ratelimit-*` or Anthropic's `anthropic-ratelimit-*`). */
export interface Charge {
  readonly over: boolean;
  readonly retryAfterS: number;
  readonly headers: Record<string, string>;
}

/** The limits of one key, charged per request: over either, the request is a 429. */
export class ServerRateLimits {
  readonly #requests: Bucket | undefined;
  readonly #tokens: Bucket | undefined;

  constructor(script: RateLimitScript, now: number) {
    const { requestsPerMinute: rpm, tokensPerMinute: tpm, windowMs = 60_000 } = script;
    this.#requests = rpm === undefined ? undefined : new Bucket(rpm, windowMs, now);
    this.#tokens = tpm === undefined ? undefined : new Bucket(tpm, windowMs, now);
  }

  charge(route: Route, tokens: number, now: number): Charge {
    const r = this.#requests;
    const t = this.#tokens;
    r?.refill(now);
    t?.refill(now);
    const wait = Math.max(r?.waitFor(1) ?? 0, t?.waitFor(Math.min(tokens, t.limit)) ?? 0);
    if (wait === 0) {
      if (r) r.level -= 1;
      if (t) t.level -= Math.min(tokens, t.level);
    }
    return {
      over: wait > 0,
      retryAfterS: Math.max(1, Math.ceil(wait / 1000)),
      headers: this.#headers(route, now),
    };
  }

  /** Every bucket's limit, remaining and reset, in the route's provider's header names:
   * OpenAI's `x-ratelimit-*` (resets as durations), or Anthropic's `anthropic-ratelimit-*`
   * (resets as RFC 3339 instants, to the second). */
  #headers(route: Route, now: number): Record<string, string> {
    const h: Record<string, string> = {};
    const anthropic = route === "anthropic";
    for (const [name, b] of [
      ["requests", this.#requests],
      ["tokens", this.#tokens],
    ] as const) {
      if (b === undefined) continue;
      const header = (what: string) =>
        anthropic ? `anthropic-ratelimit-${name}-${what}` : `x-ratelimit-${what}-${name}`;
      h[header("limit")] = String(b.limit);
      h[header("remaining")] = String(Math.floor(b.level));
      h[header("reset")] = anthropic
        ? new Date(Math.ceil((now + b.resetMs) / 1000) * 1000)
            .toISOString()
            .replace(/\.\d{3}Z$/, "Z")
        : duration(b.resetMs);
    }
    return h;
  }
}
