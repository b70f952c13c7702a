import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ArrivalsError, loadArrivals, parseArrivals, timeMs } from "../../src/storm/arrivals.ts";
import { inTrigger, SCENARIOS } from "../../src/storm/scenarios.ts";
import { simulate } from "../../src/storm/simulate.ts";
import { breakwater, naive } from "../../src/storm/stacks.ts";
import {
  busiest,
  INCIDENTS,
  refusedWindows,
  replayScenarios,
  TRACE_FILES,
  withArrivals,
} from "../../src/storm/traces.ts";

const run = promisify(execFile);
const HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens";
const TRACES = join(import.meta.dirname, "../../../shared/traces");

describe("a request log, read as arrivals", () => {
  it("reads the Azure columns, date-times with any fraction, sorted, from the first arrival", () => {
    const log = parseArrivals(
      [
        HEADER,
        "2023-11-16 18:17:04.0319600,3180,8",
        "2023-11-16 18:17:03.9799600,4808,10",
        "2023-11-16T18:17:05Z,110,27",
        "",
      ].join("\r\n"),
    );
    expect(log).toEqual([
      { atMs: 0, inputTokens: 4808, outputTokens: 10 },
      { atMs: expect.closeTo(52, 2), inputTokens: 3180, outputTokens: 8 },
      { atMs: expect.closeTo(1020.04, 2), inputTokens: 110, outputTokens: 27 },
    ]);
  });

  it("reads columns named otherwise, in any order, seconds for times, quoted fields", () => {
    const log = parseArrivals('out,"at, s",in\n12,"0.5",100\n7,2,"40"\n', {
      time: "at, s",
      input: "in",
      output: "out",
    });
    expect(log).toEqual([
      { atMs: 0, inputTokens: 100, outputTokens: 12 },
      { atMs: 1500, inputTokens: 40, outputTokens: 7 },
    ]);
  });

  it("reads a zone offset, and refuses an impossible date", () => {
    expect(timeMs("2023-11-16 18:00:00+01:00")).toBe(Date.UTC(2023, 10, 16, 17));
    expect(timeMs("2023-11-16 18:00:00-0230")).toBe(Date.UTC(2023, 10, 16, 20, 30));
    expect(timeMs("2023-02-30 00:00:00")).toBeNaN();
    expect(timeMs("2023-11-16 24:00:00")).toBeNaN();
    expect(timeMs("yesterday")).toBeNaN();
  });

  it("says what is wrong with a file that is not such a CSV: its name, the line, the field", () => {
    const bad =
      (text: string, columns = {}) =>
      () =>
        parseArrivals(text, columns, "log.csv");
    expect(bad("")).toThrow(/^log\.csv: the file: empty/);
    expect(bad("a,b,c\n1,2,3")).toThrow(
      'log.csv: the header: no column "TIMESTAMP" for the arrival time (it has "a", "b", "c"); name it with --time-column',
    );
    expect(bad("t,ContextTokens,GeneratedTokens\n1,2,3")).toThrow(/name it with --time-column/);
    expect(bad("t,i,GeneratedTokens\n1,2,3", { time: "t" })).toThrow(
      /no column "ContextTokens" for the input tokens .* --input-column/,
    );
    expect(bad(`${HEADER}\n1,2,3\nsoon,2,3`)).toThrow(
      'log.csv: line 3: the time "soon" is not a date-time (2023-11-16 18:17:03.98) or a number of seconds',
    );
    expect(bad(`${HEADER}\n1,-2,3`)).toThrow(
      'log.csv: line 2: "-2" is not a count of input tokens',
    );
    expect(bad(`${HEADER}\n1,2`)).toThrow('line 2: "" is not a count of output tokens');
    expect(bad(`${HEADER}\n\n`)).toThrow("log.csv: the file: no request under the header");
    expect(bad(HEADER, { time: 7 })).toThrow(/arrivals: option "time" must be .*; got 7/);
    expect(() => loadArrivals("/nonexistent/log.csv")).toThrow(ArrivalsError);
  });

  it("any log written as a CSV reads back as its arrivals (times from the first, sorted)", () =>
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            ms: fc.integer({ min: 0, max: 86_400_000 }),
            input: fc.integer({ min: 0, max: 200_000 }),
            output: fc.integer({ min: 0, max: 50_000 }),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        fc.constantFrom("date", "seconds"),
        (rows, form) => {
          const base = Date.UTC(2024, 0, 1);
          const time = (ms: number) =>
            form === "seconds"
              ? (ms / 1000).toFixed(3)
              : new Date(base + ms).toISOString().replace("T", " ").replace("Z", "");
          const text = [HEADER, ...rows.map((r) => `${time(r.ms)},${r.input},${r.output}`)].join(
            "\n",
          );
          const log = parseArrivals(text);
          const first = Math.min(...rows.map((r) => r.ms));
          const want = rows
            .map((r) => ({ atMs: r.ms - first, inputTokens: r.input, outputTokens: r.output }))
            .sort((a, b) => a.atMs - b.atMs);
          expect(log.map((a) => ({ ...a, atMs: Math.round(a.atMs) }))).toEqual(want);
        },
      ),
    ));

  it("never throws anything but an ArrivalsError on text that is not such a CSV", () =>
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (junk) => {
        try {
          parseArrivals(`${HEADER}\n${junk}`);
        } catch (e) {
          expect(e).toBeInstanceOf(ArrivalsError);
        }
      }),
    ));
});

describe("a log replayed in a scenario", () => {
  /** Two requests a second for two minutes, each of 1 000 input and 100 output tokens. */
  const log = Array.from({ length: 240 }, (_, i) => ({
    atMs: i * 500,
    inputTokens: 1_000,
    outputTokens: 100,
  }));

  it("each request a turn of one call at its time, the same turns under every stack", async () => {
    const s = withArrivals(SCENARIOS.blip!, log);
    expect(s.title).toMatch(/replaying your log \(240 requests\)$/);
    // A log shorter than the trouble says so: outage-503's runs to 660 s.
    expect(withArrivals(SCENARIOS["outage-503"]!, log).title).toMatch(
      /\(240 requests; it ends at 120 s, before the trouble does at 660 s\)$/,
    );
    // 2 calls/s of 1.2 s against the scenario's 48/s of 2.2 s: slots scaled to match.
    expect(s.provider.maxConcurrent).toBeLessThan(SCENARIOS.blip!.provider.maxConcurrent / 10);
    const [b, n] = await Promise.all(
      [breakwater, naive].map((stack) => simulate(s, stack, { seed: 1 })),
    );
    expect(b!.logicalCalls).toBe(240);
    expect(n!.logicalCalls).toBe(240);
    // The trigger (60-65 s) saw 10 of them; the minute after, 110 (65 s to the log's end).
    expect(b!.turns.trigger.begun).toBe(10);
    expect(b!.turns.after.begun).toBe(n!.turns.after.begun);
    expect(b!.turns.after.begun).toBe(110);
    expect(b!.turns.after.within.patience).toBe(1);
  });

  it("trouble in several windows holds in each, and only there", () => {
    const t = { startS: 10, endS: 40, windows: [[10, 15] as const, [30, 40] as const] };
    expect(
      [9_999, 10_000, 14_999, 15_000, 29_999, 30_000, 39_999, 40_000].map((ms) => inTrigger(t, ms)),
    ).toEqual([false, true, true, false, false, true, true, false]);
  });

  it("a token bucket's refusals, in windows: the busiest of a log found", () => {
    // 10/s for 10 s against 2/s with a 10 s bucket (20): the bucket lasts 2.5 s, then 2 of
    // every 10 go until the burst ends: one window, from 2 s to a second after the last.
    const burst = Array.from({ length: 100 }, (_, i) => ({
      atMs: i * 100,
      inputTokens: 1,
      outputTokens: 1,
    }));
    expect(refusedWindows(burst, 2, 10)).toEqual([[2, 11]]);
    const two = [...burst, ...burst.map((a) => ({ ...a, atMs: a.atMs + 60_000 }))];
    expect(refusedWindows(two, 2, 10)).toHaveLength(2);
    expect(busiest(two, 10_000)).toBe(0);
  });
});

describe.runIf(existsSync(join(TRACES, TRACE_FILES.code)))(
  "the Azure traces (../shared/traces)",
  () => {
    it.each(Object.values(TRACE_FILES))(
      "breakwater storm --arrivals %s replays it in a scenario",
      async (file) => {
        const dir = mkdtempSync(join(tmpdir(), "bw-trace-"));
        try {
          const json = join(dir, "r.json");
          const args = ["src/cli/main.ts", "storm", "--arrivals", join(TRACES, file)];
          const more = ["--scenario", "blip", "--stacks", "breakwater", "--threads", "1"];
          await run(process.execPath, [...args, ...more, "--json", json]);
          const [s] = JSON.parse(readFileSync(json, "utf8")).scenarios;
          // The requests of the scenario's 180 s, each a turn of one call; those begun in
          // the blip (60-65 s) and the minute after it scored as first turns.
          const log = loadArrivals(join(TRACES, file));
          const count = (a: number, b: number) =>
            log.filter((r) => r.atMs >= a * 1000 && r.atMs < b * 1000).length;
          expect(s.replayed).toBe(count(0, 180));
          expect(s.results[0].logicalCalls).toBe(count(0, 180));
          expect(s.results[0].turns.trigger.begun).toBe(count(60, 65));
          expect(s.results[0].turns.after.begun).toBe(count(65, 125));
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
      60_000,
    );

    it("read whole: 8 819 code and 19 366 chat requests", () => {
      expect(loadArrivals(join(TRACES, TRACE_FILES.code))).toHaveLength(8_819);
      expect(loadArrivals(join(TRACES, TRACE_FILES.chat))).toHaveLength(19_366);
    });

    it("replay-bursts: the code trace's busiest 15 minutes at 3x its mean rate make 8 bursts of 429s, the longest 15 s", () => {
      const [bursts, ...incidents] = replayScenarios(TRACES);
      expect(bursts!.name).toBe("replay-bursts");
      const w = bursts!.trigger.windows!;
      expect(w).toHaveLength(8);
      expect(Math.max(...w.map(([a, b]) => b - a))).toBeLessThanOrEqual(15);
      expect(bursts!.trigger.rateLimit).toEqual({ perWindow: 77, windowS: 10, usualPerWindow: 77 });
      expect(incidents.map((s) => s.name)).toEqual(
        Object.keys(INCIDENTS).map((k) => `replay-incident-${k}`),
      );
      // The incident: 30 minutes over the chat trace's busiest half hour.
      const t = incidents[0]!.trigger;
      expect(t.endS - t.startS).toBe(1_800);
      const log = incidents[0]!.arrivals!;
      const inIt = log.filter((a) => inTrigger(t, a.atMs)).length;
      expect(inIt).toBeGreaterThan(11_500);
    });
  },
);
