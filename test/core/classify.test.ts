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

  describe("precedence (docs/architecture.md, rule 3), one step at a time", () => {
    it("1. a specific permanent code beats everything after it", () => {
      const e = httpError(503, {
        error: { code: "context_length_exceeded", message: "overloaded" },
      });
      expect(classify(e).kind).toBe("context_exceeded");
    });

    it("2. wording that names a limit no wait lifts beats a transient status and code", () => {
      const quota = httpError(429, {
        error: {
          type: "rate_limit_error",
          message: "Extra usage is required for long context requests.",
        },
      });
      expect(classify(quota)).toMatchObject({ kind: "quota_exhausted", retryable: false });
      const tooLarge = httpError(429, {
        error: {
          code: "rate_limit_exceeded",
          message:
            "Rate limit reached on tokens per min (TPM): Limit 7000, Used 0, Requested ~12903.",
        },
      });
      expect(classify(tooLarge).kind).toBe("invalid_request");
      const fits = httpError(429, {
        error: {
          code: "rate_limit_exceeded",
          message:
            "Rate limit reached on tokens per min (TPM): Limit 7000, Used 6900, Requested 300.",
        },
      });
      expect(classify(fits).kind).toBe("rate_limited");
    });

    it("2. client wording (context, key) never speaks over a 429 or a transient code", () => {
      expect(
        classify(httpError(429, { error: { message: "Too many tokens, please wait" } })).kind,
      ).toBe("rate_limited");
      const inBand = Object.assign(new Error("Too many tokens, please wait"), {
        name: "ThrottlingException",
      });
      expect(classify(inBand).kind).toBe("rate_limited");
      expect(
        classify(httpError(400, { error: { message: "Too many tokens in batch" } })).kind,
      ).toBe("context_exceeded");
    });

    it("3. a permanent status beats a transient code: a 413 'rate_limit_exceeded' is not retried", () => {
      expect(
        classify(
          httpError(413, {
            error: { code: "rate_limit_exceeded", message: "Please reduce your message size" },
          }),
        ),
      ).toMatchObject({
        kind: "invalid_request",
        retryable: false,
      });
      expect(classify(httpError(402)).kind).toBe("quota_exhausted");
      expect(classify(httpError(499)).kind).toBe("cancelled");
    });

    it("4-6. a generic body type never overrides the status; it speaks only when there is none", () => {
      const mistral = httpError(429, {
        error: {
          type: "invalid_request_error",
          message: "Service tier capacity exceeded for this model.",
        },
      });
      expect(classify(mistral)).toMatchObject({ kind: "overloaded", retryable: true });
      expect(classify(httpError(401, { error: { code: "invalid_request_error" } })).kind).toBe(
        "auth",
      );
      expect(classify(httpError(404, { error: { type: "api_error" } })).kind).toBe("not_found");
      expect(classify(httpError(503, { error: { type: "server_error" } })).kind).toBe("overloaded");
      expect(classify({ type: "invalid_request_error", message: "bad" }).kind).toBe(
        "invalid_request",
      );
    });

    it("an unrecognised code with no status says nothing; an error with only text is unknown", () => {
      expect(classify({ code: "something_new" }).kind).toBe("unknown");
      expect(classify(new Error("prompt is too long")).kind).toBe("unknown");
    });
  });

  describe("where SDKs put what the server said", () => {
    it("a body folded into the message (@google/genai, Mistral, Anthropic), even twice", () => {
      const inner = JSON.stringify({
        error: {
          code: 429,
          status: "RESOURCE_EXHAUSTED",
          details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "26s" }],
        },
      });
      const genai = new Error(
        `got status: 429 Too Many Requests. ${JSON.stringify({ error: { message: inner, code: 429 } })}`,
      );
      expect(classify(genai)).toMatchObject({
        kind: "rate_limited",
        status: 429,
        retryAfterMs: 26_000,
      });
      const mistral = Object.assign(
        new Error(
          'API error occurred: Status 429 Body: {"object":"error","message":"Service tier capacity exceeded for this model.","type":"invalid_request_error"}',
        ),
        { statusCode: 429 },
      );
      expect(classify(mistral)).toMatchObject({ kind: "overloaded", status: 429 });
    });

    it("Google details: a per-day QuotaFailure is a spent quota, ErrorInfo API_KEY_INVALID is auth", () => {
      const perDay = httpError(429, {
        error: {
          status: "RESOURCE_EXHAUSTED",
          details: [
            {
              "@type": "type.googleapis.com/google.rpc.QuotaFailure",
              violations: [{ quotaId: "GenerateRequestsPerDayPerProjectPerModel-FreeTier" }],
            },
          ],
        },
      });
      expect(classify(perDay)).toMatchObject({ kind: "quota_exhausted", retryable: false });
      const key = httpError(400, {
        error: {
          status: "INVALID_ARGUMENT",
          details: [
            { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID" },
          ],
        },
      });
      expect(classify(key).kind).toBe("auth");
    });

    it("AWS SDK v3: the exception name and $metadata.httpStatusCode; a stream's 200 is no status", () => {
      const throttled = Object.assign(new Error("Too many requests"), {
        name: "ThrottlingException",
        $metadata: { httpStatusCode: 429 },
      });
      expect(classify(throttled)).toMatchObject({ kind: "rate_limited", status: 429 });
      const inStream = Object.assign(new Error("Model has timed out"), {
        name: "ModelTimeoutException",
        $response: { statusCode: 200 },
      });
      expect(classify(inStream)).toMatchObject({ kind: "timeout", retryable: true });
      const generic = Object.assign(new Error("Input is too long for requested model."), {
        name: "Unknown",
        $metadata: { httpStatusCode: 400 },
      });
      expect(classify(generic).kind).toBe("context_exceeded");
    });

    it("the AI SDK's responseBody text, RetryError.lastError, Vertex's array bodies, xAI's URL-encoded text", () => {
      const apiCall = Object.assign(new Error("Bad Request"), {
        statusCode: 400,
        responseBody: '{"error":"This model\'s maximum prompt length is 131072"}',
      });
      expect(classify(apiCall).kind).toBe("context_exceeded");
      const retryError = Object.assign(new Error("Failed after 3 attempts"), {
        name: "AI_RetryError",
        lastError: httpError(503),
        errors: [httpError(500), httpError(503)],
      });
      expect(classify(retryError)).toMatchObject({ kind: "overloaded", status: 503 });
      const vertex = httpError(400, {
        responseBody:
          '[{"error":{"code":400,"message":"Project x is not allowed to use Publisher Model y","status":"FAILED_PRECONDITION"}}]',
      });
      expect(classify(vertex).kind).toBe("auth");
      const xai = httpError(400, { error: "Incorrect%20API%20key%20provided" });
      expect(classify(xai).kind).toBe("auth");
    });

    it("SDK classes by what they are: openai's timeout class keeps .name 'Error'", () => {
      class APIError extends Error {}
      class APIConnectionError extends APIError {}
      class APIConnectionTimeoutError extends APIConnectionError {}
      class APIUserAbortError extends APIError {}
      expect(new APIConnectionTimeoutError("Request timed out.").name).toBe("Error");
      expect(classify(new APIConnectionTimeoutError("Request timed out.")).kind).toBe("timeout");
      expect(classify(new APIConnectionError("Connection error.")).kind).toBe("transport");
      expect(classify(new APIUserAbortError("Request was aborted.")).kind).toBe("cancelled");
    });

    it("TLS failures stay loud, even inside an SDK's connection error; the OS code beats a class name", () => {
      const tls = Object.assign(new Error("self-signed certificate"), {
        code: "DEPTH_ZERO_SELF_SIGNED_CERT",
      });
      const wrapped = Object.assign(new Error("Connection error."), {
        name: "APIConnectionError",
        cause: new TypeError("fetch failed", { cause: tls }),
      });
      expect(classify(wrapped)).toMatchObject({
        kind: "unknown",
        retryable: false,
        code: "DEPTH_ZERO_SELF_SIGNED_CERT",
      });
      const awsReset = Object.assign(new Error("read ECONNRESET"), {
        name: "TimeoutError",
        code: "ECONNRESET",
      });
      expect(classify(awsReset)).toMatchObject({ kind: "transport", code: "ECONNRESET" });
    });

    it("Azure's x-ratelimit-reset-* headers are the wait hint of a 429 without Retry-After", () => {
      const e = httpError(429, { headers: new Headers({ "x-ratelimit-reset-tokens": "55" }) });
      expect(classify(e, NOW).retryAfterMs).toBe(55_000);
      const withRetryAfter = httpError(429, {
        headers: new Headers({ "retry-after": "2", "x-ratelimit-reset-tokens": "55" }),
      });
      expect(classify(withRetryAfter, NOW).retryAfterMs).toBe(2_000);
    });
  });
});
