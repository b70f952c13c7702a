import { afterEach, beforeEach } from "vitest";

export { useFaultServer } from "../fault-fixture.ts";

import type { Ledger } from "../../src/core/ledger.ts";
import type { GiveUpEvent, PolicyOptions } from "../../src/policy/options.ts";
import { policy } from "../../src/policy/policy.ts";

/** A fast policy for real-HTTP tests, recording the ledger of every successful call and
 * every give-up. */
export function testPolicy(extra: PolicyOptions = {}) {
  const ledgers: Ledger[] = [];
  const gaveUp: GiveUpEvent[] = [];
  const p = policy({
    maxAttempts: 3,
    backoff: { baseMs: 10, capMs: 20 },
    retryAfter: { maxMs: 5_000, jitterMs: 0 },
    idleTimeoutMs: 300,
    onSuccess: (e) => void ledgers.push(e.ledger),
    onGiveUp: (e) => void gaveUp.push(e),
    ...extra,
  });
  return { p, ledgers, gaveUp };
}

export const TEXT = "The fault server says hello, one word at a time.";

export async function drain<T>(it: AsyncIterable<T>): Promise<{ chunks: T[]; error: unknown }> {
  const chunks: T[] = [];
  try {
    for await (const c of it) chunks.push(c);
    return { chunks, error: undefined };
  } catch (error) {
    return { chunks, error };
  }
}

/** The process warnings emitted while each test of the file runs (breakwater says an
 * ignored retry knob once, as a warning): read after a turn of the event loop. */
export function useWarnings(): { readonly all: string[]; settled(): Promise<string[]> } {
  const all: string[] = [];
  const onWarning = (w: Error) => void all.push(w.message);
  beforeEach(() => {
    all.length = 0;
    process.on("warning", onWarning);
  });
  afterEach(() => void process.off("warning", onWarning));
  return {
    all,
    settled: () => new Promise((r) => setImmediate(() => r(all))),
  };
}

/** The first answer announces a `charge` tool call and is cut before its arguments. */
export const announcedThenCut = (args: string) => ({
  requests: [1, 1] as [number, number],
  text: "",
  toolCalls: [{ name: "charge", arguments: args }],
  stream: { after: 0, action: "cut" as const },
});
