import { describe, expect, it } from "vitest";
import { demo } from "../../src/cli/demo.ts";

describe("breakwater demo", () => {
  it("runs policy() as users get it and shows each case's ending, requests and waits", async () => {
    const lines: string[] = [];
    await demo((s) => void lines.push(s));
    const text = lines.join("\n");
    expect(lines[0]).toMatch(/policy\(\) as you get it \(its defaults\)/);
    const endings = lines
      .filter((l) => l.startsWith("  => "))
      .map((l) => l.slice(5).split(" (")[0]);
    expect(endings).toEqual([
      '"Your refund was issued on Monday."',
      '"Done."',
      "gave up: not-retryable",
      "gave up: deadline",
      "gave up: deadline",
      "gave up: retry-after-too-long",
      "gave up: rate-limit-wait",
    ]);
    const requests = [...text.matchAll(/, (\d+) request\(s\)/g)].map((m) => Number(m[1]));
    // With a deadline the attempts go on while it allows (10 at most); nothing sent while held.
    expect(requests).toEqual([3, 2, 1, 8, 1, 1, 0]);
    expect(text).toMatch(/wait before attempt 2: 3\.\d\d s \(retry-after, after rate_limited\)/);
  });
});
