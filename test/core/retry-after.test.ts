import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseRateLimitReset } from "../../src/core/ratelimit.ts";
import {
  MAX_DELAY_MS,
  parseHttpDate,
  parseMessageWait,
  parseResetValue,
  parseRetryAfter,
} from "../../src/core/retry-after.ts";

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

  it("reads second 60 as the leap second it is: after :59, never earlier (ky's suite has the case)", () => {
    const now = Date.UTC(2016, 11, 31, 23, 59, 0);
    expect(parseHttpDate("Sat, 31 Dec 2016 23:59:60 GMT", now)).toBe(Date.UTC(2017, 0, 1));
    expect(parseRetryAfter("Sat, 31 Dec 2016 23:59:60 GMT", now)).toBe(60_000);
    expect(parseRetryAfter("Sat, 31 Dec 2016 23:59:59 GMT", now)).toBe(59_000);
    expect(parseRetryAfter("Sat, 31 Dec 2016 23:59:61 GMT", now)).toBeUndefined();
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

  it("two headers, merged by fetch into one list: the longest wait, dates kept whole", () => {
    const h = new Headers();
    h.append("retry-after", "1");
    h.append("retry-after", "3");
    expect(h.get("retry-after")).toBe("1, 3");
    expect(parseRetryAfter(h, NOW)).toBe(3_000);
    const date = new Date(NOW + 20_000).toUTCString(); // "Sun, 29 Nov 2026 12:00:20 GMT"
    expect(parseRetryAfter(`2, ${date}`, NOW)).toBe(20_000);
    expect(parseRetryAfter(`${date}, 30`, NOW)).toBe(30_000);
    expect(parseRetryAfter("soon, 4", NOW)).toBe(4_000); // a member that is no wait is skipped
    expect(parseRetryAfter("soon, later", NOW)).toBeUndefined();
    expect(parseRetryAfter({ "retry-after-ms": "250, 900" }, NOW)).toBe(900);
  });

  it("property: a merged list of delay-seconds and dates is its longest member", () => {
    const member = fc.oneof(
      fc.nat(100_000).map((n) => ({ text: String(n), ms: n * 1000 })),
      fc.integer({ min: 0, max: 10_000_000 }).map((s) => ({
        text: new Date(NOW + s * 1000).toUTCString(),
        ms: s * 1000,
      })),
    );
    fc.assert(
      fc.property(fc.array(member, { minLength: 1, maxLength: 5 }), (list) => {
        const merged = list.map((m) => m.text).join(", ");
        const longest = Math.min(MAX_DELAY_MS, Math.max(...list.map((m) => m.ms)));
        return parseRetryAfter(merged, NOW) === longest;
      }),
    );
  });
});

describe("parseMessageWait: a wait named only in the error's text", () => {
  it("reads each provider's wording", () => {
    // OpenAI and Groq: "Please try again in ..." (durations as in x-ratelimit-reset-*).
    expect(parseMessageWait("... Requested 19126. Please try again in 11.455s. Visit ...")).toBe(
      11_455,
    );
    expect(parseMessageWait("Please try again in 644ms.")).toBe(644);
    expect(parseMessageWait("Please try again in 6m0s.")).toBe(360_000);
    expect(parseMessageWait("Please try again in 114h18m0s. Visit")).toBe(411_480_000);
    // Gemini: "Please retry in ...".
    expect(parseMessageWait("Quota exceeded ... Please retry in 36.4s.")).toBe(36_400);
    expect(parseMessageWait("Please retry in 10.689924287s.")).toBe(10_690);
  });

  it("reads no wait from text that names none", () => {
    for (const t of [
      "Please try again later.",
      "Resource exhausted. Please try again later. Please refer to https://cloud.google.com/...",
      "try again in a moment",
      "retry in 5 minutes or so", // no unit it knows
      "",
    ])
      expect(parseMessageWait(t), t).toBeUndefined();
  });
});

describe("parseRateLimitReset (x-ratelimit-reset-*: Azure seconds, OpenAI durations)", () => {
  it("reads seconds and Go-style durations, and takes the later of two windows", () => {
    expect(parseResetValue("55")).toBe(55_000);
    expect(parseResetValue("6m0s")).toBe(360_000);
    expect(parseResetValue("1.5s")).toBe(1_500);
    expect(parseResetValue("20ms")).toBe(20);
    expect(parseResetValue("1h2m3s")).toBe(3_723_000);
    for (const bad of ["", "s", "m", "1x", "-1s", "1m1h", "ms"])
      expect(parseResetValue(bad)).toBeUndefined();
    const headers = new Headers({
      "x-ratelimit-reset-requests": "1s",
      "x-ratelimit-reset-tokens": "6m0s",
    });
    expect(parseRateLimitReset(headers)).toBe(360_000);
    expect(parseRateLimitReset({ "x-rate-limit-reset-tokens": "55" })).toBe(55_000);
    expect(parseRateLimitReset({})).toBeUndefined();
  });

  it("property: a duration built from parts parses to its milliseconds", () => {
    const part = fc.option(fc.nat(10_000), { nil: undefined });
    fc.assert(
      fc.property(part, part, part, part, (h, m, s, ms) => {
        const text = `${h !== undefined ? `${h}h` : ""}${m !== undefined ? `${m}m` : ""}${s !== undefined ? `${s}s` : ""}${ms !== undefined ? `${ms}ms` : ""}`;
        const want = (h ?? 0) * 3_600_000 + (m ?? 0) * 60_000 + (s ?? 0) * 1000 + (ms ?? 0);
        return text === ""
          ? parseResetValue(text) === undefined
          : parseResetValue(text) === Math.min(want, MAX_DELAY_MS);
      }),
    );
  });

  it("property: never throws, never negative, NaN or beyond the longest timer", () => {
    fc.assert(
      fc.property(fc.string(), (v) => {
        const r = parseResetValue(v);
        return r === undefined || (Number.isFinite(r) && r >= 0 && r <= MAX_DELAY_MS);
      }),
      { numRuns: 2000 },
    );
  });
});
