import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { GoogleGenAI } from "@google/genai";
import { describe, expect, it } from "vitest";
import { classify, policy } from "../../src/index.ts";
import { type Attempt, type Fault, TRANSPORT_CLIENTS, withFault } from "./corpus/transport.ts";

/** What each way of failing must classify as, whatever the SDK wraps it in. */
const EXPECT: Record<Fault, { kind: string; retryable: boolean }> = {
  refused: { kind: "transport", retryable: true },
  reset: { kind: "transport", retryable: true },
  "cut mid-body": { kind: "transport", retryable: true },
  dns: { kind: "transport", retryable: true },
  // A certificate that does not verify is configuration: the next attempt meets it again.
  tls: { kind: "unknown", retryable: false },
  silent: { kind: "timeout", retryable: true },
  abort: { kind: "cancelled", retryable: false },
};

/** Where a client's error cannot say more than it does, and why. */
const VIA: Partial<Record<`${Fault} via ${string}`, { kind: string; retryable: boolean }>> = {
  // @google/genai's `httpOptions.timeout` aborts its own controller with no reason: the
  // error is a bare AbortError, the same object a caller's abort makes. Read alone it is a
  // cancellation; inside a policy it is a timeout (the test below).
  "silent via @google/genai": { kind: "cancelled", retryable: false },
};

function attempt(fault: Fault, url: string): Attempt {
  if (fault === "silent") return { url, timeoutMs: 300 };
  if (fault === "abort") {
    const caller = new AbortController();
    setTimeout(() => caller.abort(), 50);
    return { url, signal: caller.signal };
  }
  return { url };
}

const FAULTS = Object.keys(EXPECT) as Fault[];
const rows = FAULTS.flatMap((fault) =>
  Object.entries(TRANSPORT_CLIENTS).map(([name, client]) => [fault, name, client] as const),
);

describe("connections that fail before an answer, as each SDK raises them on Node", () => {
  it.each(rows)("%s via %s", { timeout: 15_000 }, async (fault, name, client) => {
    const error = await withFault(fault, (url) => client(attempt(fault, url)));
    expect(error, "the SDK raised no error").toBeDefined();
    const f = classify(error);
    expect({ kind: f.kind, retryable: f.retryable }).toEqual(
      VIA[`${fault} via ${name}`] ?? EXPECT[fault],
    );
  });

  it("@google/genai's own timeout, inside a policy, is a timeout and is retried", async () => {
    let requests = 0;
    const server = createServer((req) => {
      requests++;
      req.resume(); // and never answer
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const ai = new GoogleGenAI({
      apiKey: "test",
      httpOptions: { baseUrl: `http://127.0.0.1:${port}`, timeout: 150 },
    });
    const failures: string[] = [];
    const p = policy({
      maxAttempts: 2,
      backoff: { baseMs: 1, capMs: 1 },
      onRetry: ({ failure }) => void failures.push(failure.kind),
    });
    try {
      const error = await p
        .execute(({ signal }) =>
          ai.models.generateContent({
            model: "m",
            contents: "hi",
            config: { abortSignal: signal },
          }),
        )
        .catch((e: unknown) => e);
      expect(classify(error).kind).toBe("cancelled"); // the object alone cannot tell
      expect(failures).toEqual(["timeout"]); // the policy can: nobody it knows aborted
      expect(requests).toBe(2);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
