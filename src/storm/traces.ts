import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Arrival, loadArrivals, meanRate } from "./arrivals.ts";
import { type ProviderSpec, SCENARIOS, type Scenario, type TriggerSpec } from "./scenarios.ts";
import { expectedCallMs, logCallMs, offeredCallRate } from "./simulate.ts";

/**
 * The public traces the replay scenarios read (docs/storm.md, "What is data"): Azure's LLM
 * inference traces of 2023 (CC BY 4.0; Patel et al., "Splitwise", ISCA 2024), not shipped
 * in the package. `breakwater storm --traces DIR` reads them from DIR.
 */
export const TRACE_FILES = {
  chat: "AzureLLMInferenceTrace_conv.csv",
  code: "AzureLLMInferenceTrace_code.csv",
} as const;

/** The stretch of `log` from `fromMs`, `ms` long, its times from the stretch's start. */
function stretch(log: readonly Arrival[], fromMs: number, ms: number): Arrival[] {
  return log
    .filter((a) => a.atMs >= fromMs && a.atMs < fromMs + ms)
    .map((a) => ({ ...a, atMs: a.atMs - fromMs }));
}

/** Where the busiest `ms` of `log` begin (the window with the most arrivals). */
export function busiest(log: readonly Arrival[], ms: number): number {
  let best = 0;
  let from = 0;
  for (let i = 0, k = 0; i < log.length; i++) {
    while (k < log.length && log[k]!.atMs < log[i]!.atMs + ms) k++;
    if (k - i > best) {
      best = k - i;
      from = log[i]!.atMs;
    }
  }
  return from;
}

/**
 * The trouble windows a token bucket makes of `log` with no retries (seconds): the
 * instants it refuses, those closer than `gapS` joined, each window to a second after its
 * last refusal. The bucket holds `rate` × `windowS` and refills at `rate` a second,
 * continuously (as the storm's provider enforces a limit).
 */
export function refusedWindows(
  log: readonly Arrival[],
  rate: number,
  windowS: number,
  gapS = 5,
): [number, number][] {
  const cap = rate * windowS;
  let level = cap;
  let at = 0;
  const out: [number, number][] = [];
  for (const a of log) {
    const t = a.atMs / 1000;
    level = Math.min(cap, level + (t - at) * rate);
    at = t;
    if (level >= 1) {
      level -= 1;
      continue;
    }
    const last = out.at(-1);
    if (last !== undefined && t - (last[1] - 1) < gapS) last[1] = Math.ceil(t) + 1;
    else out.push([Math.floor(t), Math.ceil(t) + 1]);
  }
  return out;
}

/** The trigger of several windows: the trouble holds in each; its span is theirs. */
const over = (windows: [number, number][], trouble: Omit<TriggerSpec, "startS" | "endS">) => ({
  startS: windows[0]![0],
  endS: windows.at(-1)![1],
  ...(windows.length > 1 && { windows }),
  ...trouble,
});

/** A provider for a log: the storm's own, with as many slots as keep its mean load at 80%
 * of them (as the built-in scenarios' users keep theirs), a queue half as deep. */
function providerFor(log: readonly Arrival[], base: ProviderSpec): ProviderSpec {
  const slots = Math.max(1, Math.ceil((meanRate(log) * logCallMs(log, base)) / 1000 / 0.8));
  return { ...base, maxConcurrent: slots, maxQueue: Math.ceil(slots / 2) };
}

/**
 * The code trace's busiest 15 minutes (and the minute after), against a rate limit of 3×
 * the whole trace's mean rate (a bucket of 10 s of it, refilled continuously: 17.4% of its
 * requests refused with no retries, in 8 bursts of at most 13 s). The trouble windows are
 * those bursts: does a stack stretch a 13 s burst of 429s into a longer storm?
 */
function replayBursts(trace: readonly Arrival[]): Scenario {
  const base = SCENARIOS["rate-limit"]!;
  const log = stretch(trace, busiest(trace, 900_000), 960_000);
  const rate = 3 * meanRate(trace);
  const windows = refusedWindows(
    log.filter((a) => a.atMs < 900_000),
    rate,
    10,
  );
  const perWindow = Math.round(rate * 10);
  return {
    ...base,
    name: "replay-bursts",
    title: "The code-completion trace's busiest 15 minutes against a rate limit of 3× its mean",
    source:
      "Azure LLM inference trace 2023 (code); the rate limit is an assumption: its bursts outrun it",
    durationS: 960,
    provider: { ...base.provider, maxConcurrent: 130, maxQueue: 60 },
    trigger: over(windows, { rateLimit: { perWindow, windowS: 10, usualPerWindow: perWindow } }),
    arrivals: log,
  };
}

/** The intensities the chat replay's incident is swept over: no public data says them. */
export const INCIDENTS = {
  "503-10": { errorRate: 0.1, errorStatus: 503 },
  "503-30": { errorRate: 0.3, errorStatus: 503 },
  "529-10": { errorRate: 0.1, errorStatus: 529 },
  "529-30": { errorRate: 0.3, errorStatus: 529 },
  "latency-3x": { latencyFactor: 3 },
} as const satisfies Record<string, Omit<TriggerSpec, "startS" | "endS">>;

/**
 * The chat trace's hour, with one 30-minute incident over its busiest half hour, at one of
 * the swept intensities: the real shape of a day's traffic through an incident as long as a
 * real one's third (the median is 75-90 minutes).
 */
function replayIncident(trace: readonly Arrival[], kind: keyof typeof INCIDENTS): Scenario {
  const base = SCENARIOS["outage-503"]!;
  const from = Math.floor(busiest(trace, 1_800_000) / 1000);
  return {
    ...base,
    name: `replay-incident-${kind}`,
    title: `The chat trace's hour through a 30-minute incident over its peak: ${kind === "latency-3x" ? "latency ×3" : `${INCIDENTS[kind].errorRate * 100}% of requests ${INCIDENTS[kind].errorStatus}`}`,
    source:
      "Azure LLM inference trace 2023 (chat); the incident's length is the data's (about a third of a real one), its intensity swept",
    durationS: Math.ceil((trace.at(-1)?.atMs ?? 0) / 1000) + 1,
    provider: providerFor(trace, base.provider),
    trigger: { startS: from, endS: from + 1_800, ...INCIDENTS[kind] },
    arrivals: trace,
  };
}

/** The replay scenarios whose trace is in `dir` (none when it is missing): replay-bursts
 * (the code trace) and replay-incident-* (the chat trace, at each swept intensity). */
export function replayScenarios(dir: string): Scenario[] {
  const out: Scenario[] = [];
  const code = join(dir, TRACE_FILES.code);
  const chat = join(dir, TRACE_FILES.chat);
  if (existsSync(code)) out.push(replayBursts(loadArrivals(code)));
  if (existsSync(chat)) {
    const trace = loadArrivals(chat);
    for (const kind of Object.keys(INCIDENTS) as (keyof typeof INCIDENTS)[])
      out.push(replayIncident(trace, kind));
  }
  return out;
}

/** Says so when the log ends before the trouble does: the rest of the trigger meets nobody. */
function coverage(arrivals: readonly Arrival[], t: TriggerSpec): string {
  const endS = (arrivals.at(-1)?.atMs ?? 0) / 1000;
  return endS < t.endS
    ? `; it ends at ${Math.round(endS)} s, before the trouble does at ${t.endS} s`
    : "";
}

/**
 * `scenario`'s trouble met by `log`'s requests (your own, or a trace): each a turn of one
 * call at its time with its own tokens (those past the scenario's end dropped), the
 * provider's slots, queue and rate limits scaled by the log's mean load over the scenario
 * users' own, so the trouble bites your traffic as it bites theirs.
 */
export function withArrivals(scenario: Scenario, log: readonly Arrival[]): Scenario {
  const arrivals = log.filter((a) => a.atMs < scenario.durationS * 1000);
  const own = offeredCallRate(scenario);
  const theirs = meanRate(arrivals);
  const k = (theirs * logCallMs(arrivals, scenario.provider)) / (own * expectedCallMs(scenario));
  const perRate = theirs / own;
  const p = scenario.provider;
  const t = scenario.trigger;
  const limit = t.rateLimit;
  const scaled = (n: number, by: number) => Math.max(1, Math.round(n * by));
  return {
    ...scenario,
    title: `${scenario.title}, replaying your log (${arrivals.length} requests${coverage(arrivals, t)})`,
    provider: { ...p, maxConcurrent: scaled(p.maxConcurrent, k), maxQueue: scaled(p.maxQueue, k) },
    trigger:
      limit === undefined
        ? t
        : {
            ...t,
            rateLimit: {
              ...limit,
              perWindow: scaled(limit.perWindow, perRate),
              ...(limit.usualPerWindow !== undefined && {
                usualPerWindow: scaled(limit.usualPerWindow, perRate),
              }),
            },
          },
    arrivals,
  };
}
