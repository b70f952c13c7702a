import { describe, expect, it } from "vitest";
import { audit } from "../../src/audit/audit.ts";
import { auditCommand } from "../../src/cli/audit.ts";
import { activity, retryPolicy } from "../../src/engines/temporal.ts";
import { policy } from "../../src/policy/policy.ts";

// audit reads the durable engines' retry settings beside the SDKs' (docs/architecture.md,
// rule 22): the layers that multiply, and the one that never does.
describe("audit: durable engines", () => {
  it("Temporal as teams write it: unlimited activity attempts over the SDK's 3", () => {
    const r = audit([], { temporal: { retry: {} }, openai: { maxRetries: 2 } });
    expect(r.layers.map((l) => [l.name, l.attempts])).toEqual([
      ["temporal", Number.POSITIVE_INFINITY],
      ["openai", 3],
    ]);
    expect(r.worstCaseRequests).toBe(Number.POSITIVE_INFINITY);
    expect(r.warnings.join("\n")).toMatch(
      /Temporal retries every activity failure \(maximumAttempts unlimited\)/,
    );
  });

  it("Temporal through breakwater's activity(): its retries follow breakwater's waits, 1×", () => {
    const p = policy();
    const answer = activity(async () => "ok", { policy: p });
    const r = audit([], { temporal: { retry: retryPolicy(), activity: answer } });
    expect(r.layers).toEqual([
      expect.objectContaining({ name: "temporal (breakwater's mapping)", attempts: 1 }),
    ]);
    expect(r.worstCaseRequests).toBe(1);
    expect(r.warnings).toEqual([]);
  });

  it("Restate's documented composition: ctx.run's 3 over the AI SDK's 3 is 9", () => {
    const r = audit([], { restate: { maxRetryAttempts: 3 }, aiSdk: { maxRetries: 2 } });
    expect(r.worstCaseRequests).toBe(9);
    expect(r.warnings.join("\n")).toMatch(/breakwater\/restate's run/);
    // With no retry options of its own, a ctx.run follows the server's policy: 70 attempts.
    expect(audit([], { restate: {} }).layers[0]).toMatchObject({ attempts: 70 });
  });

  it("DBOS: a step retries only with retriesAllowed (3 attempts by default)", () => {
    expect(audit([], { dbos: { retriesAllowed: false } }).layers).toEqual([]);
    const r = audit([], { dbos: { retriesAllowed: true, intervalSeconds: 2 } });
    expect(r.layers[0]).toMatchObject({
      name: "dbos step",
      attempts: 3,
      worstWaitMs: 2_000 + 4_000,
    });
    expect(r.warnings.join("\n")).toMatch(/breakwater\/dbos's step/);
  });

  it("breakwater audit takes the engines' numbers: Temporal's default of 0 is unlimited", () => {
    const lines: string[] = [];
    const rc = auditCommand(
      ["--temporal-maximum-attempts", "0", "--openai-max-retries", "2"],
      (l) => void lines.push(l),
    );
    expect(rc).toBe(1); // warnings
    expect(lines).toContain(
      "worst case: unlimited × 3 = unlimited requests per logical call, unbounded of stacked backoff",
    );
    const dbos: string[] = [];
    auditCommand(
      ["--dbos-max-attempts", "3", "--ai-sdk-max-retries", "2"],
      (l) => void dbos.push(l),
    );
    expect(dbos.join("\n")).toMatch(/3 × 3 = 9 requests per logical call/);
    expect(() => auditCommand(["--restate-max-retry-attempts", "0"], () => {})).toThrow(
      /--restate-max-retry-attempts must be an integer from 1/,
    );
  });
});
