import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type LimitState, parseRateLimitHeaders } from "../../src/core/ratelimit.ts";

interface Expected {
  limit?: number;
  remaining?: number;
  resetInMs?: number;
  resetAt?: number;
}
interface Case {
  id: string;
  provider: string;
  source: string;
  headers: Record<string, string>;
  expect: Record<string, Expected>;
}

const CORPUS: Case[] = JSON.parse(
  readFileSync(new URL("./corpus/ratelimit-headers.json", import.meta.url), "utf8"),
);
const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

const want = (e: Expected): LimitState => ({
  ...(e.limit !== undefined && { limit: e.limit }),
  ...(e.remaining !== undefined && { remaining: e.remaining }),
  ...(e.resetInMs !== undefined && { resetAtMs: NOW + e.resetInMs }),
  ...(e.resetAt !== undefined && { resetAtMs: e.resetAt }),
});

describe("parseRateLimitHeaders: headers providers really sent, with provenance", () => {
  it("covers the providers the issue names", () => {
    const providers = new Set(CORPUS.map((c) => c.provider));
    for (const p of ["openai", "azure-openai", "anthropic", "groq", "mistral", "openrouter"])
      expect(providers).toContain(p);
    for (const c of CORPUS) expect(c.source).toMatch(/^https:\/\//);
  });

  it.each(CORPUS.map((c) => [c.id, c] as const))("%s", (_, c) => {
    const expected = Object.fromEntries(Object.entries(c.expect).map(([k, v]) => [k, want(v)]));
    // As a record, as fetch Headers (case-insensitive) and with names upper-cased.
    expect(parseRateLimitHeaders(c.headers, NOW)).toEqual(expected);
    expect(parseRateLimitHeaders(new Headers(c.headers), NOW)).toEqual(expected);
    const upper = Object.fromEntries(
      Object.entries(c.headers).map(([k, v]) => [k.toUpperCase(), v]),
    );
    expect(parseRateLimitHeaders(upper, NOW)).toEqual(expected);
  });
});

describe("parseRateLimitHeaders", () => {
  it("reads OpenRouter's epoch reset in seconds or milliseconds", () => {
    const h = { "x-ratelimit-limit": "20", "x-ratelimit-remaining": "3" };
    expect(parseRateLimitHeaders({ ...h, "x-ratelimit-reset": "1764504000000" }, NOW)).toEqual({
      requests: { limit: 20, remaining: 3, resetAtMs: 1764504000000 },
    });
    expect(parseRateLimitHeaders({ ...h, "x-ratelimit-reset": "1764504000" }, NOW)).toEqual({
      requests: { limit: 20, remaining: 3, resetAtMs: 1764504000000 },
    });
  });

  it("keeps Anthropic's combined tokens only when input and output are not given", () => {
    const combined = {
      "anthropic-ratelimit-tokens-limit": "100",
      "anthropic-ratelimit-tokens-remaining": "10",
    };
    expect(parseRateLimitHeaders(combined, NOW).tokens).toEqual({ limit: 100, remaining: 10 });
    const split = { ...combined, "anthropic-ratelimit-input-tokens-limit": "80" };
    expect(parseRateLimitHeaders(split, NOW)).toEqual({ inputTokens: { limit: 80 } });
  });

  it("does not take OpenAI's *_usage_based headers for the tokens dimension", () => {
    expect(parseRateLimitHeaders({ "x-ratelimit-remaining-tokens_usage_based": "5" }, NOW)).toEqual(
      {},
    );
  });

  it("ignores forms it does not know, and nonsense, without throwing", () => {
    expect(
      parseRateLimitHeaders(
        {
          "x-ratelimit-limit-requests": "lots",
          "x-ratelimit-remaining-requests": "-1",
          "x-ratelimit-reset-requests": "soon",
          "anthropic-ratelimit-requests-reset": "2026-13-45T99:99:99Z",
        },
        NOW,
      ),
    ).toEqual({});
    expect(parseRateLimitHeaders(undefined, NOW)).toEqual({});
    expect(parseRateLimitHeaders("x-ratelimit-limit-requests: 5", NOW)).toEqual({});
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error("boom");
        },
        ownKeys() {
          throw new Error("boom");
        },
      },
    );
    expect(parseRateLimitHeaders(hostile, NOW)).toEqual({});
    expect(parseRateLimitHeaders({ "x-ratelimit-limit-requests": "5" }, Number.NaN)).toEqual({
      requests: { limit: 5 },
    });
  });

  it("never throws and never returns NaN, whatever the values (property)", () => {
    const names = [
      "x-ratelimit-limit-requests",
      "x-ratelimit-remaining-tokens",
      "x-ratelimit-reset-tokens",
      "x-rate-limit-reset-requests",
      "anthropic-ratelimit-input-tokens-reset",
      "anthropic-ratelimit-output-tokens-limit",
      "x-ratelimit-reset",
      "x-ratelimit-remaining",
    ];
    const value = fc.oneof(
      fc.string(),
      fc.double().map(String),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      fc.tuple(fc.nat(99), fc.nat(59), fc.nat(999)).map(([m, s, ms]) => `${m}m${s}.${ms}s`),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...names), value), fc.double(), (h, now) => {
        const out = parseRateLimitHeaders(h, now);
        for (const s of Object.values(out) as LimitState[]) {
          for (const n of Object.values(s)) expect(Number.isFinite(n)).toBe(true);
          if (s.limit !== undefined) expect(s.limit).toBeGreaterThanOrEqual(0);
          if (s.remaining !== undefined) expect(s.remaining).toBeGreaterThanOrEqual(0);
        }
      }),
    );
  });

  it("reads a fetch Headers (walked once) as it reads the same headers one by one (property)", () => {
    const names = [
      "X-RateLimit-Limit-Requests",
      "x-ratelimit-remaining-requests",
      "x-ratelimit-reset-requests",
      "x-ratelimit-limit-tokens",
      "x-rate-limit-reset-tokens",
      "anthropic-ratelimit-tokens-limit",
      "anthropic-ratelimit-input-tokens-limit",
      "anthropic-ratelimit-requests-reset",
      "x-ratelimit-limit",
      "x-ratelimit-reset",
      "content-type",
    ];
    const value = fc.oneof(
      fc.nat().map(String),
      fc.constantFrom("1s", "6m0s", "250ms", "2026-12-01T10:00:00Z", "1764583200", "junk"),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...names), value), (h) => {
        const now = 1_764_580_000_000;
        expect(parseRateLimitHeaders(new Headers(h), now)).toEqual(parseRateLimitHeaders(h, now));
      }),
    );
  });
});
