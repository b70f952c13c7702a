import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { classify } from "../../src/core/classify.ts";
import { KINDS as KIND_FACTS } from "../../src/core/failure.ts";

const KINDS = new Set([
  "rate_limited",
  "overloaded",
  "server_error",
  "timeout",
  "transport",
  "quota_exhausted",
  "context_exceeded",
  "invalid_request",
  "auth",
  "not_found",
  "content_filtered",
  "cancelled",
  "unknown",
]);

/** Error-like values: SDK shapes with random statuses, codes, headers and causes. */
const errorLike = fc.letrec((tie) => ({
  err: fc.record(
    {
      name: fc.constantFrom(
        "Error",
        "APIError",
        "AbortError",
        "TimeoutError",
        "APIConnectionError",
        "TypeError",
      ),
      message: fc.string(),
      status: fc.oneof(fc.integer({ min: 0, max: 700 }), fc.constant(undefined), fc.string()),
      code: fc.oneof(
        fc.constantFrom(
          "ECONNRESET",
          "insufficient_quota",
          "rate_limit_exceeded",
          "weird_new_code",
        ),
        fc.string(),
        fc.integer(),
      ),
      headers: fc.dictionary(
        fc.constantFrom("retry-after", "retry-after-ms", "Retry-After", "x-other"),
        fc.string(),
      ),
      error: fc.oneof(
        fc.anything(),
        fc.record({ type: fc.string(), code: fc.string(), status: fc.string() }),
      ),
      cause: fc.oneof(fc.constant(undefined), tie("err")),
    },
    { requiredKeys: [] },
  ),
}));

describe("classify (property)", () => {
  it("never throws, always names a known kind, and retries exactly the transient kinds", () => {
    fc.assert(
      fc.property(fc.oneof(errorLike.err, fc.anything()), (e) => {
        const f = classify(e, 1_800_000_000_000);
        expect(KINDS.has(f.kind)).toBe(true);
        expect(f.retryable).toBe(KIND_FACTS[f.kind].retryable); // no x-should-retry in these shapes
        if (f.retryAfterMs !== undefined)
          expect(Number.isFinite(f.retryAfterMs) && f.retryAfterMs >= 0).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});
