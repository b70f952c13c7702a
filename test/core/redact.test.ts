import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/core/clock.ts";
import { redact, scrubError } from "../../src/core/redact.ts";
import { policy } from "../../src/policy/policy.ts";
import { driveError } from "../helpers.ts";

describe("redact", () => {
  it.each([
    ["sk-proj-abcdefghijklmnop1234", "sk-[redacted]"],
    ["sk-ant-api03-abcdefghijklmnopq", "sk-[redacted]"],
    ["AIzaSyA1234567890abcdefghijklmnop", "AIza[redacted]"],
    ["Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "Authorization: [redacted]"],
    ["x-api-key: abc123secret", "x-api-key: [redacted]"],
    [
      "https://api.example.com/v1?key=secretvalue&x=1",
      "https://api.example.com/v1?key=[redacted]&x=1",
    ],
    ["https://user:pa55word@host.example/path", "https://[redacted]@host.example/path"],
  ])("masks %s", (input, expected) => {
    expect(redact(`before ${input} after`)).toBe(`before ${expected} after`);
  });

  it("leaves ordinary text alone", () => {
    const text = "HTTP 503: the server is overloaded (retry after 2 s); task-1234 skipped";
    expect(redact(text)).toBe(text);
  });

  it("scrubs an error and its causes in place, read-only messages included", () => {
    const inner = new Error("upstream rejected key sk-live-0123456789abcdef");
    const outer = new Error("call failed: Bearer abcdefghijklmnop", { cause: inner });
    expect(scrubError(outer)).toBe(outer);
    expect(outer.message).toBe("call failed: Bearer [redacted]");
    expect(inner.message).toBe("upstream rejected key sk-[redacted]");
    expect(() => scrubError(new DOMException("aborted", "AbortError"))).not.toThrow();
  });

  it("every error a policy throws leaves with secrets masked", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 2 });
    const err = await driveError(
      clock,
      p.execute(() => {
        throw Object.assign(new Error("bad request for https://x.test/?api_key=supersecret1"), {
          status: 400,
        });
      }),
    );
    expect((err as Error).message).toBe("bad request for https://x.test/?api_key=[redacted]");
  });
});
