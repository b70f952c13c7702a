import { describe, expect, it } from "vitest";
import { classify } from "../../src/core/classify.ts";
import { httpError } from "../helpers.ts";

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);

describe("classify", () => {
  it.each([
    [429, "rate_limited", true],
    [503, "overloaded", true],
    [529, "overloaded", true],
    [500, "server_error", true],
    [502, "server_error", true],
    [504, "timeout", true],
    [408, "timeout", true],
    [400, "invalid_request", false],
    [422, "invalid_request", false],
    [409, "invalid_request", false],
    [401, "auth", false],
    [403, "auth", false],
    [404, "not_found", false],
  ])("status %i is %s (retryable %s)", (status, kind, retryable) => {
    expect(classify(httpError(status), NOW)).toMatchObject({ kind, retryable, status });
  });

  it("reads statusCode and response.status", () => {
    expect(classify({ statusCode: 503 }).kind).toBe("overloaded");
    expect(classify({ response: { status: 401 } }).kind).toBe("auth");
  });

  it("lets a recognised permanent provider code win over a retryable-looking status", () => {
    // OpenAI: a 429 with insufficient_quota is a spent balance, not a rate limit.
    const quota = httpError(429, { code: "insufficient_quota", type: "insufficient_quota" });
    expect(classify(quota)).toMatchObject({
      kind: "quota_exhausted",
      retryable: false,
      status: 429,
      code: "insufficient_quota",
    });
    const ctx = httpError(400, {
      error: { code: "context_length_exceeded", type: "invalid_request_error" },
    });
    expect(classify(ctx)).toMatchObject({ kind: "context_exceeded", retryable: false });
    const key = httpError(500, { code: "invalid_api_key" });
    expect(classify(key)).toMatchObject({ kind: "auth", retryable: false });
  });

  it("reads Anthropic's nested body and Gemini's status field", () => {
    const overloaded = httpError(529, {
      error: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
    });
    expect(classify(overloaded)).toMatchObject({
      kind: "overloaded",
      retryable: true,
      code: "overloaded_error",
    });
    const billing = httpError(400, { error: { type: "error", error: { type: "billing_error" } } });
    expect(classify(billing).kind).toBe("quota_exhausted");
    const gemini = httpError(429, {
      error: { code: 429, status: "RESOURCE_EXHAUSTED", message: "slow down" },
    });
    expect(classify(gemini)).toMatchObject({ kind: "rate_limited", code: "RESOURCE_EXHAUSTED" });
  });

  it("reads Gemini RetryInfo.retryDelay as the wait hint", () => {
    const e = httpError(429, {
      error: {
        status: "RESOURCE_EXHAUSTED",
        details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "7s" }],
      },
    });
    expect(classify(e).retryAfterMs).toBe(7_000);
  });

  it("detects a context-length error sent with a generic code", () => {
    const e = httpError(400, {
      error: {
        type: "error",
        error: {
          type: "invalid_request_error",
          message: "prompt is too long: 210000 tokens > 200000 maximum",
        },
      },
    });
    expect(classify(e).kind).toBe("context_exceeded");
  });

  it("lets an unrecognised code fall through to the status", () => {
    expect(classify(httpError(503, { code: "brand_new_code" }))).toMatchObject({
      kind: "overloaded",
      retryable: true,
      code: "brand_new_code",
    });
    expect(classify(httpError(400, { code: "brand_new_code" })).retryable).toBe(false);
  });

  it("reads an in-band error with no status (an error event in a 200 stream)", () => {
    expect(
      classify({ error: { type: "error", error: { type: "overloaded_error" } } }),
    ).toMatchObject({ kind: "overloaded", retryable: true });
    expect(classify({ error: { code: "context_length_exceeded" } }).kind).toBe("context_exceeded");
  });

  it("honours x-should-retry", () => {
    expect(
      classify(httpError(503, { headers: new Headers({ "x-should-retry": "false" }) })).retryable,
    ).toBe(false);
    expect(classify(httpError(409, { headers: { "x-should-retry": "true" } })).retryable).toBe(
      true,
    );
    // ...but never makes a spent quota retryable.
    expect(
      classify(
        httpError(429, { code: "insufficient_quota", headers: { "x-should-retry": "true" } }),
      ).retryable,
    ).toBe(false);
  });

  it("parses Retry-After from the error's headers", () => {
    const e = httpError(429, {
      headers: new Headers({ "retry-after": "Sun, 29 Nov 2026 12:00:10 GMT" }),
    });
    expect(classify(e, NOW).retryAfterMs).toBe(10_000);
    expect(
      classify(httpError(503, { responseHeaders: { "retry-after-ms": "1500" } })).retryAfterMs,
    ).toBe(1500);
  });

  it("classifies Node and undici network failures, walking the cause chain", () => {
    const reset = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    expect(classify(reset)).toMatchObject({
      kind: "transport",
      retryable: true,
      code: "ECONNRESET",
    });
    const fetchFailed = new TypeError("fetch failed", {
      cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }),
    });
    expect(classify(fetchFailed)).toMatchObject({ kind: "transport", code: "ECONNREFUSED" });
    const terminated = new TypeError("terminated", {
      cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }),
    });
    expect(classify(terminated).kind).toBe("transport");
    expect(classify(Object.assign(new Error("t"), { code: "UND_ERR_HEADERS_TIMEOUT" })).kind).toBe(
      "timeout",
    );
    const wrapped = new Error("outer", { cause: new Error("middle", { cause: httpError(502) }) });
    expect(classify(wrapped)).toMatchObject({ kind: "server_error", status: 502 });
  });

  it("classifies SDK connection errors by name", () => {
    const conn = Object.assign(new Error("Connection error."), { name: "APIConnectionError" });
    expect(classify(conn).kind).toBe("transport");
    const to = Object.assign(new Error("Request timed out."), {
      name: "APIConnectionTimeoutError",
    });
    expect(classify(to).kind).toBe("timeout");
  });

  it("puts cancellation first: never retried", () => {
    const abort = new DOMException("aborted", "AbortError");
    expect(classify(abort)).toMatchObject({ kind: "cancelled", retryable: false });
    expect(classify(new Error("x", { cause: abort })).kind).toBe("cancelled");
    const userAbort = Object.assign(new Error("Request was aborted."), {
      name: "APIUserAbortError",
    });
    expect(classify(userAbort).kind).toBe("cancelled");
  });

  it("calls an error with nothing to go on unknown and does not retry it", () => {
    for (const e of [
      new Error("boom"),
      new TypeError("x is not a function"),
      "a string",
      42,
      null,
      undefined,
      {},
    ]) {
      expect(classify(e)).toEqual({ kind: "unknown", retryable: false });
    }
  });

  it("survives cyclic cause chains", () => {
    const a: Error & { cause?: unknown } = new Error("a");
    const b = new Error("b", { cause: a });
    a.cause = b;
    expect(classify(a).kind).toBe("unknown");
  });
});
