import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/core/clock.ts";
import { type Ask, askedAgain, gaveUpOn, RETRY_WINDOW_MS } from "../../src/providers/given-up.ts";

// The give-up record in virtual time: what is a layer's retry of the same call, what is a
// new call.
const clock = new VirtualClock();
const ask = (turns: unknown, model = "m"): Ask => ({
  turns,
  model,
  owner: "test",
  layer: () => "a retry loop",
  now: () => clock.now(),
});

describe("a give-up is final for its call, for a layer that asks again within the window", () => {
  it("the same last turn, the same model: the same error, until the window passes since the last ask", async () => {
    const user = { role: "user", content: "hi" };
    const error = new Error("503");
    gaveUpOn(ask([{ role: "system" }, user]), error);
    // A retry copies the list (a system turn put in front again): its last turn is the same.
    expect(askedAgain(ask([{ role: "system" }, user]))).toEqual({ error });
    await clock.advance(RETRY_WINDOW_MS - 1);
    expect(askedAgain(ask([user]))?.error).toBe(error); // and the window starts again
    await clock.advance(RETRY_WINDOW_MS - 1);
    expect(askedAgain(ask([user]))?.error).toBe(error);
    await clock.advance(RETRY_WINDOW_MS + 1);
    expect(askedAgain(ask([user]))).toBeUndefined(); // a person asking again: sent
    expect(askedAgain(ask([user]))).toBeUndefined(); // and the record is gone
  });

  it("a new call (new turns, equal in content), another model, or no turns at all: never refused", () => {
    const user = { role: "user", content: "hi" };
    gaveUpOn(ask([user]), new Error("503"));
    expect(askedAgain(ask([{ role: "user", content: "hi" }]))).toBeUndefined();
    expect(askedAgain(ask([user], "another model"))).toBeUndefined();
    expect(gaveUpOn(ask(undefined), "e")).toBe("e");
    expect(askedAgain(ask(undefined))).toBeUndefined();
    expect(askedAgain(ask([]))).toBeUndefined();
  });
});
