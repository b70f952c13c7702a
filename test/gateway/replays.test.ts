import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Answer, Replays } from "../../src/gateway/replays.ts";

const answer = (bytes: number, status = 200): Answer => ({
  status,
  headers: { "content-type": "application/json" },
  body: Buffer.alloc(bytes, 120),
});

describe("Replays: the answers kept for Idempotency-Key", () => {
  it("a key's first request goes on; again with the same body it is replayed, with another a mismatch", () => {
    const r = new Replays(60_000, 1 << 20);
    const first = r.begin("k", "body", 0);
    expect(first.kind).toBe("first");
    expect(r.begin("k", "body", 1).kind).toBe("wait");
    if (first.kind === "first") first.done(answer(10));
    const again = r.begin("k", "body", 2);
    expect(again.kind === "replay" && again.answer.body.length).toBe(10);
    expect(r.begin("k", "another body", 3).kind).toBe("mismatch");
  });

  it("nothing kept for an answer not handed on whole; the waiter is let go and goes first", async () => {
    const r = new Replays(60_000, 1 << 20);
    const first = r.begin("k", "b", 0);
    const waiting = r.begin("k", "b", 1);
    if (first.kind !== "first" || waiting.kind !== "wait") throw new Error("turns");
    first.done(undefined);
    await waiting.settled;
    expect(r.begin("k", "b", 2).kind).toBe("first");
  });

  it("an answer is kept its TTL, and one over a sixteenth of maxBytes not at all", () => {
    const now = Date.now();
    const r = new Replays(1_000, 1 << 16);
    const a = r.begin("a", "b", now);
    if (a.kind === "first") a.done(answer(100));
    expect(r.begin("a", "b", now + 500).kind).toBe("replay");
    expect(r.begin("a", "b", now + 5_000).kind).toBe("first"); // expired: asked again
    const big = r.begin("big", "b", now);
    if (big.kind === "first") big.done(answer((1 << 16) / 16 + 1));
    expect(r.begin("big", "b", now + 1).kind).toBe("first");
  });

  it("what is kept stays within maxBytes, the oldest dropped first (property)", () => {
    const max = 1 << 16;
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: max / 16 }), { maxLength: 200 }), (sizes) => {
        const r = new Replays(3_600_000, max);
        sizes.forEach((n, i) => {
          const t = r.begin(`k${i}`, "b");
          if (t.kind === "first") t.done(answer(n));
        });
        let kept = 0;
        let newest = -1;
        sizes.forEach((n, i) => {
          const t = r.begin(`k${i}`, "b");
          if (t.kind === "replay") {
            kept += n;
            newest = i;
          } else if (t.kind === "first") t.done(undefined);
        });
        expect(kept).toBeLessThanOrEqual(max);
        if (sizes.length > 0) expect(newest).toBe(sizes.length - 1); // the last one kept stays
      }),
    );
  });
});
