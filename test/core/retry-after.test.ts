import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_DELAY_MS, parseHttpDate, parseRetryAfter } from "../../src/core/retry-after.ts";

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0); // Sun, 29 Nov 2026 12:00:00 GMT

describe("parseRetryAfter", () => {
  it("reads delay-seconds", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120_000);
    expect(parseRetryAfter(" 3 ", NOW)).toBe(3_000);
    expect(parseRetryAfter("0", NOW)).toBe(0);
    expect(parseRetryAfter(2, NOW)).toBe(2_000);
  });

  it("reads all three HTTP-date forms of RFC 9110", () => {
    expect(parseRetryAfter("Sun, 29 Nov 2026 12:00:30 GMT", NOW)).toBe(30_000); // IMF-fixdate
    expect(parseRetryAfter("Sunday, 29-Nov-26 12:01:00 GMT", NOW)).toBe(60_000); // RFC 850
    expect(parseRetryAfter("Sun Nov 29 12:00:05 2026", NOW)).toBe(5_000); // asctime
    expect(parseRetryAfter("Sun Nov  1 12:00:00 2026", NOW)).toBe(0); // asctime, padded day, past
  });

  it("treats a past date as 0", () => {
    expect(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", NOW)).toBe(0);
  });

  it("prefers retry-after-ms, then Retry-After, in Headers, Maps and records", () => {
    expect(parseRetryAfter(new Headers({ "retry-after-ms": "250", "retry-after": "9" }), NOW)).toBe(
      250,
    );
    expect(parseRetryAfter(new Headers({ "Retry-After": "9" }), NOW)).toBe(9_000);
    expect(parseRetryAfter(new Map([["Retry-After", "4"]]), NOW)).toBe(4_000);
    expect(parseRetryAfter({ "RETRY-AFTER": "1" }, NOW)).toBe(1_000);
    expect(parseRetryAfter({ "retry-after-ms": "junk", "retry-after": "2" }, NOW)).toBe(2_000);
    expect(parseRetryAfter({}, NOW)).toBeUndefined();
  });

  it("returns undefined for garbage", () => {
    for (const bad of [
      "",
      "soon",
      "-5",
      "1e3",
      "NaN",
      "Infinity",
      "Sun, 31 Feb 2026 00:00:00 GMT",
      "12:00",
    ]) {
      expect(parseRetryAfter(bad, NOW), bad).toBeUndefined();
    }
    expect(parseRetryAfter(Number.NaN, NOW)).toBeUndefined();
    expect(parseRetryAfter(-1, NOW)).toBeUndefined();
    expect(parseRetryAfter(null)).toBeUndefined();
  });

  it("never exceeds the longest timer", () => {
    expect(parseRetryAfter("99999999999999999999", NOW)).toBe(MAX_DELAY_MS);
    expect(parseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", NOW)).toBe(MAX_DELAY_MS);
  });

  it("property: never negative, NaN or infinite for any string", () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 0, max: 4_102_444_800_000 }), (s, now) => {
        const r = parseRetryAfter(s, now);
        return r === undefined || (Number.isFinite(r) && r >= 0 && r <= MAX_DELAY_MS);
      }),
      { numRuns: 2000 },
    );
  });

  it("property: any date round-trips through IMF-fixdate", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253_402_300_799 }), (secs) => {
        const ms = secs * 1000;
        return parseHttpDate(new Date(ms).toUTCString(), NOW) === ms;
      }),
    );
  });

  it("property: delay-seconds parse to exactly seconds × 1000", () => {
    fc.assert(fc.property(fc.nat(2_000_000), (n) => parseRetryAfter(String(n), NOW) === n * 1000));
  });
});
