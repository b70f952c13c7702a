import { RetryError } from "ai";
import { describe, expect, it } from "vitest";
import {
  AttemptTimeoutError,
  BreakwaterError,
  failureOf,
  RequestCheckError,
  reasonOf,
} from "../../src/core/errors.ts";

describe("what an error says", () => {
  it("a wait in whole milliseconds, in the message and the field", () => {
    const e = new BreakwaterError("retry-after-too-long", { retryAfterMs: 9990.481201171875 });
    expect(e.message).toBe(
      "the server asked to wait longer than allowed (backpressure) (retry after 9991 ms)",
    );
    expect(e.retryAfterMs).toBe(9991);
    expect(new AttemptTimeoutError("attempt", 150.0001).message).toBe(
      "attempt timeout after 150 ms",
    );
  });

  it("a request refused before it was sent: reasonOf says not-retryable, failureOf its kind", () => {
    const e = new RequestCheckError("max-output", "no room");
    expect(reasonOf(e)).toBe("not-retryable");
    expect(failureOf(e)).toEqual({
      kind: "context_exceeded",
      retryable: false,
      code: "max-output",
    });
    expect(reasonOf(new Error("wrapped", { cause: e }))).toBe("not-retryable");
  });

  it("the AI SDK's RetryError around breakwater's give-up: reasonOf reads its last error", () => {
    const gaveUp = new BreakwaterError("circuit-open");
    const e = new RetryError({
      message: "failed after 3",
      reason: "maxRetriesExceeded",
      errors: [new Error("x"), gaveUp],
    });
    expect(reasonOf(e)).toBe("circuit-open");
  });
});
