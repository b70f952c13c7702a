import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/core/clock.ts";
import type { BreakwaterError } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import { FakeStream, type StreamStep } from "../../src/testing/fake-stream.ts";
import { drive, httpError } from "../helpers.ts";

type Chunk = { attempt: number; i: number; meta?: boolean };

/** One attempt's script: some chunks (the first `meta` ones are not content), then an end
 * or a retryable failure. */
const attemptScript = fc.record({
  meta: fc.integer({ min: 0, max: 2 }),
  chunks: fc.integer({ min: 0, max: 5 }),
  fails: fc.boolean(),
});

describe("policy.stream never replays (property)", () => {
  it("what the consumer sees comes from one attempt, in order, once; a late failure interrupts", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(attemptScript, { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 5 }),
        async (scripts, maxAttempts) => {
          const clock = new VirtualClock();
          const p = policy({ clock, maxAttempts, backoff: { baseMs: 10, capMs: 10 } });
          let opened = 0;
          const open = () => {
            const a = ++opened;
            const s = scripts[Math.min(a - 1, scripts.length - 1)]!;
            const steps: StreamStep<Chunk>[] = [];
            for (let i = 0; i < s.meta + s.chunks; i++)
              steps.push({
                chunk: { attempt: a, i, ...(i < s.meta && { meta: true }) },
                afterMs: 1,
              });
            if (s.fails) steps.push({ error: httpError(503), afterMs: 1 });
            return new FakeStream(clock, steps);
          };
          const seen: Chunk[] = [];
          const stream = p.stream(open, { isContent: (c) => !c.meta });
          const r = await drive(
            clock,
            (async () => {
              for await (const c of stream) seen.push(c);
            })(),
          );
          // One attempt, in order, no duplicates.
          expect(new Set(seen.map((c) => c.attempt)).size).toBeLessThanOrEqual(1);
          expect(seen.map((c) => c.i)).toEqual(seen.map((_, k) => k));
          const content = seen.filter((c) => !c.meta);
          if (!r.ok && content.length > 0) {
            // Output reached the consumer: the failure interrupts, and nothing is opened again.
            expect((r.error as BreakwaterError).reason).toBe("stream-interrupted");
            expect(opened).toBe(seen[0]!.attempt);
          }
          expect(opened).toBeLessThanOrEqual(maxAttempts);
          expect(clock.pending).toBe(0);
        },
      ),
      { numRuns: 300 },
    );
  });
});
