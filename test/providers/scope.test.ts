import { describe, expect, it } from "vitest";
import { scoped, seenAs } from "../../src/providers/scope.ts";

describe("seenAs: the error an SDK method call rejects with, for telemetry", () => {
  it("outside a method call: none", () => {
    expect(seenAs()).toBeUndefined();
  });

  it("asked before the call settles: the error it rejects with, or undefined when it resolves", async () => {
    const failing = new Error("the SDK's own");
    let seen: PromiseLike<unknown> | undefined;
    const call = scoped(async () => {
      seen = seenAs();
      throw failing;
    });
    const told = Promise.resolve(seen!).then((e) => e);
    await expect(call).rejects.toBe(failing);
    expect(await told).toBe(failing);
    let ok: PromiseLike<unknown> | undefined;
    await scoped(async () => {
      ok = seenAs();
      return 1;
    });
    expect(await ok!).toBeUndefined();
  });

  it("asked only after the call settled (nothing waits on a call that nobody asks about)", async () => {
    const failing = new Error("late");
    let seen: PromiseLike<unknown> | undefined;
    await scoped(async () => {
      seen = seenAs();
      throw failing;
    }).catch(() => {});
    // `then` with a rejection handler too, and chained: it behaves as a promise would.
    expect(await seen!.then((e) => [e])).toEqual([failing]);
  });
});
