import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { audit } from "../../src/audit/audit.ts";
import { parseLayers } from "../../src/cli/audit.ts";
import { withBreakwater } from "../../src/providers/openai.ts";

describe("audit", () => {
  it("worked example W1: caller 2 × decorator 3 × SDK 5 = 30 requests per logical call", () => {
    const r = audit([
      { name: "caller", attempts: 2 },
      { name: "decorator", attempts: 3, backoff: { baseMs: 1_000, jitter: "none" } },
      {
        name: "java-genai",
        attempts: 5,
        backoff: { baseMs: 1_000, capMs: 60_000, jitter: "up-to-2x" },
      },
    ]);
    expect(r.worstCaseRequests).toBe(30);
    // decorator waits (1 + 2 s) per caller attempt; the SDK's (2+4+8+16 s) per decorator attempt.
    expect(r.layers.map((l) => l.worstWaitMs)).toEqual([0, 3_000, 30_000]);
    expect(r.worstCaseWaitMs).toBe(2 * 3_000 + 6 * 30_000);
  });

  it("reads the SDKs' own retries off real clients and flags them", () => {
    const hidden = audit([{ name: "mine", attempts: 3 }], {
      openai: new OpenAI({ apiKey: "k" }),
      google: new GoogleGenAI({ apiKey: "k", httpOptions: { retryOptions: { attempts: 5 } } }),
      aiSdk: {},
    });
    expect(hidden.worstCaseRequests).toBe(3 * 3 * 5 * 3);
    expect(hidden.warnings.join("\n")).toMatch(/openai retries on its own \(maxRetries 2\)/);
    expect(hidden.warnings.join("\n")).toMatch(/@google\/genai retries on its own \(5 attempts\)/);
    expect(hidden.warnings.join("\n")).toMatch(/pass maxRetries: 0 to generateText\/streamText/);
    const clean = audit([{ name: "breakwater", attempts: 3 }], {
      openai: withBreakwater(new OpenAI({ apiKey: "k" })),
      google: new GoogleGenAI({ apiKey: "k" }),
      aiSdk: { maxRetries: 0 },
    });
    expect(clean.warnings).toEqual([]);
    expect(clean.worstCaseRequests).toBe(3);
  });

  it("validates its input", () => {
    expect(() => audit([{ name: "x", attempts: 0 }])).toThrow(
      /"layers\[0\].attempts" must be an integer >= 1; got 0/,
    );
    expect(() => parseLayers("caller:two")).toThrow(/name:attempts/);
  });

  it("runs as breakwater audit", async () => {
    const run = promisify(execFile);
    const r = await run(process.execPath, [
      "src/cli/main.ts",
      "audit",
      "--layers",
      "caller:2,decorator:3,sdk:5",
      "--ai-sdk-max-retries",
      "0",
    ]);
    expect(r.stdout).toMatch(/2 × 3 × 5 × 1 = 30 requests per logical call/); // the AI SDK, retries off, is one attempt
    const flagged = await run(process.execPath, [
      "src/cli/main.ts",
      "audit",
      "--layers",
      "app:3",
      "--openai-max-retries",
      "2",
    ]).catch((e) => e);
    expect(flagged.code).toBe(1);
    expect(flagged.stdout).toMatch(/warning: openai retries on its own/);
  });
});
