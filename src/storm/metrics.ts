import type { Price, Usage } from "../index.ts";
import { inTrigger, type Scenario } from "./scenarios.ts";
import type { ProviderMeter, RejectReason } from "./types.ts";

/** Per-second series, all of length durationS. */
export interface Series {
  /** Requests arriving at the provider. */
  requests: number[];
  /** Logical calls that succeeded while their user still waited. */
  goodput: number[];
  /** Logical calls started. */
  calls: number[];
  /** Requests the provider rejected (overflow or injected errors). */
  rejected: number[];
  /** Requests in service at the end of each second (a sample). */
  inService: number[];
  queued: number[];
  /** Tool scenario: requests arriving at the tool's dependency. */
  toolRequests: number[];
  /** Requests sent to a fallback provider (stacks that have one). */
  fallbackRequests: number[];
}

/** Whole turns as users live them, in one window: each conversation's first turn begun
 * there (it begins at the same instant under every stack, so the sample is matched). A turn
 * is answered when all its calls and tools were, while its user still waited. */
export interface TurnScore {
  /** First turns begun in the window. */
  begun: number;
  /** The share of them answered within T seconds, for T = 20, 30, 60 and the patience. */
  within: { s20: number; s30: number; s60: number; patience: number };
  /** The share answered within each whole second, from 0 to the patience: `curve[t]`. */
  curve: number[];
  /** What the users whose turn was answered waited for it (seconds). */
  answeredWaitS: { p50: number; p90: number };
}

/** One stack's numbers in one scenario. */
export interface StackResult {
  stack: string;
  /** It sends calls to a second provider too (compared with the other such stacks). */
  fallback: boolean;
  /** Runs inside a durable engine: compared with the other engine rows. */
  engine?: true;
  logicalCalls: number;
  providerRequests: number;
  /** Provider requests per logical call. */
  amplification: number;
  /** The same, for calls started during the trigger. */
  amplificationDuringTrigger: number;
  /** Share of decided logical calls that succeeded while their user waited (per call: a
   * user still waiting starts fewer calls during the trouble, so fewer can fail; `turns`
   * scores what users live). */
  successRate: number;
  /** What users waited for a turn (seconds): answer, error or giving up. */
  userWaitS: { p50: number; p99: number };
  /** Whole turns: the matched first turns begun during the trigger, and in the minute after
   * it, and how many of each were answered within T. */
  turns: { patienceS: number; trigger: TurnScore; after: TurnScore };
  tokens: { billed: number; used: number; wasted: number };
  cost: { billed: number; wasted: number };
  /** Side effects executed more than once (tool scenario). */
  duplicateSideEffects: number;
  /** The tool scenario's dependency: logical tool calls, the requests it received (overall
   * and per call during the trigger), and the share of tool calls that succeeded. */
  tool?: {
    calls: number;
    requests: number;
    amplification: number;
    amplificationDuringTrigger: number;
    successRate: number;
  };
  /** Seconds after the trigger ended until goodput was back to what the same users got
   * with no trigger at all (a calm run of the same seed), for 10 s; null if not within the
   * run. */
  recoveryS: number | null;
  /** Provider requests per second in the 60 s after the trigger, over their rate before
   * it: above 1, the trouble outlived its trigger. */
  loadAfterTrigger: number;
  /** Successful logical calls per second while the trigger lasted. */
  goodputDuringTrigger: number;
  /** The share of the requests sent in the 60 s after the trigger that the provider
   * refused: serving demand held through the trouble is fine, a retry storm is not. */
  refusedAfterTrigger: number;
  /** Requests the provider refused, by why: its queue was full, the trigger's injected
   * errors, its rate limit, a spent quota. */
  rejections: Record<RejectReason, number>;
  /** Requests sent to a fallback provider. */
  fallbackRequests: number;
  series: Series;
}

const zeros = (n: number) => new Array<number>(n).fill(0);

/** Collects what one simulation run did. */
export class Metrics implements ProviderMeter {
  readonly #n: number;
  readonly #scenario: Scenario;
  readonly series: Series;
  #requests = 0;
  #triggerRequests = 0;
  #calls = 0;
  #triggerCalls = 0;
  #ok = 0;
  #decided = 0;
  #billed = { inputTokens: 0, outputTokens: 0 };
  #used = { inputTokens: 0, outputTokens: 0 };
  readonly #waits: number[] = [];
  /** Matched first turns: their waits when answered, NaN when not. */
  readonly #firstTurns = { trigger: [] as number[], after: [] as number[] };
  duplicateSideEffects = 0;
  #tool = { calls: 0, triggerCalls: 0, requests: 0, triggerRequests: 0, ok: 0 };
  readonly #rejections: Record<RejectReason, number> = {
    overflow: 0,
    injected: 0,
    rate: 0,
    quota: 0,
  };
  #fallbackRequests = 0;

  constructor(scenario: Scenario) {
    this.#scenario = scenario;
    this.#n = scenario.durationS;
    const n = this.#n;
    this.series = {
      requests: zeros(n),
      goodput: zeros(n),
      calls: zeros(n),
      rejected: zeros(n),
      inService: new Array<number>(n).fill(-1),
      queued: new Array<number>(n).fill(-1),
      toolRequests: zeros(n),
      fallbackRequests: zeros(n),
    };
  }

  /** The meter of a fallback provider: its requests are counted apart, its tokens billed. */
  fallbackMeter(): ProviderMeter {
    return {
      arrival: (ms) => {
        if (this.#outside(ms)) return;
        this.#fallbackRequests++;
        this.series.fallbackRequests[this.#second(ms)]!++;
      },
      rejected: () => {},
      inService: () => {},
      served: (arrivedMs, usage) => this.served(arrivedMs, usage),
    };
  }

  #second(ms: number): number {
    return Math.min(this.#n - 1, Math.max(0, Math.floor(ms / 1000)));
  }

  #inTrigger(ms: number) {
    return inTrigger(this.#scenario.trigger, ms);
  }

  /** Only [0, durationS) is measured: the warm-up before 0 is not. */
  #outside(ms: number): boolean {
    return ms < 0 || ms >= this.#n * 1000;
  }

  arrival(ms: number) {
    if (this.#outside(ms)) return;
    this.#requests++;
    if (this.#inTrigger(ms)) this.#triggerRequests++;
    this.series.requests[this.#second(ms)]!++;
  }

  toolArrival(ms: number) {
    if (this.#outside(ms)) return;
    this.#tool.requests++;
    if (this.#inTrigger(ms)) this.#tool.triggerRequests++;
    this.series.toolRequests[this.#second(ms)]!++;
  }

  toolCallStarted(ms: number): boolean {
    if (this.#outside(ms)) return false;
    this.#tool.calls++;
    if (this.#inTrigger(ms)) this.#tool.triggerCalls++;
    return true;
  }

  toolCallSucceeded() {
    this.#tool.ok++;
  }

  rejected(ms: number, reason: RejectReason) {
    if (this.#outside(ms)) return;
    this.series.rejected[this.#second(ms)]!++;
    this.#rejections[reason]++;
  }

  /** A sample of the provider's occupancy, taken whenever a request starts or finishes. */
  inService(ms: number, inService: number, queued: number) {
    if (this.#outside(ms)) return;
    const s = this.#second(ms);
    this.series.inService[s] = inService;
    this.series.queued[s] = queued;
  }

  /** A request the provider finished (and billed); counted when it arrived in the window. */
  served(arrivedMs: number, usage: Usage) {
    if (this.#outside(arrivedMs)) return;
    this.#billed.inputTokens += usage.inputTokens;
    this.#billed.outputTokens += usage.outputTokens;
  }

  /** Whether a call started at `ms` is measured (its end is recorded only then). */
  callStarted(ms: number): boolean {
    if (this.#outside(ms)) return false;
    this.#calls++;
    if (this.#inTrigger(ms)) this.#triggerCalls++;
    this.series.calls[this.#second(ms)]!++;
    return true;
  }

  /** A logical call is decided: it answered, failed, or its user stopped waiting. Calls
   * still undecided when the run ends count in neither the numerator nor the denominator
   * of the success rate. `usage` counts as used only for a success. */
  callDecided(ms: number, ok: boolean, usage: Usage | undefined, measured: boolean) {
    if (this.#outside(ms)) return;
    // Goodput counts every answer users received in the window, whenever its call began.
    if (ok) this.series.goodput[this.#second(ms)]!++;
    if (!measured) return;
    this.#decided++;
    if (!ok) return;
    this.#ok++;
    if (usage) {
      this.#used.inputTokens += usage.inputTokens;
      this.#used.outputTokens += usage.outputTokens;
    }
  }

  turnEnded(startedMs: number, waitMs: number) {
    if (!this.#outside(startedMs)) this.#waits.push(waitMs);
  }

  /** First turns scored and not yet ended: the run goes on past its end until they have. */
  firstTurnsOpen = 0;

  /** Where a first turn begun at `ms` is scored: the trigger, the minute after it, or none. */
  #turnWindow(ms: number): number[] | undefined {
    const { startS, endS } = this.#scenario.trigger;
    if (this.#inTrigger(ms) && endS > startS) return this.#firstTurns.trigger;
    if (ms >= endS * 1000 && ms < (endS + 60) * 1000) return this.#firstTurns.after;
    return undefined;
  }

  /** A conversation's first turn began at `ms`. */
  firstTurnBegan(ms: number) {
    if (this.#turnWindow(ms) !== undefined) this.firstTurnsOpen++;
  }

  /** A conversation's first turn ended: answered after `waitMs`, or not at all. Kept when it
   * began during the trigger or in the minute after it. */
  firstTurnEnded(startedMs: number, answered: boolean, waitMs: number) {
    const window = this.#turnWindow(startedMs);
    if (window === undefined) return;
    this.firstTurnsOpen--;
    window.push(answered ? waitMs : Number.NaN);
  }

  #toolResult(): NonNullable<StackResult["tool"]> {
    const t = this.#tool;
    return {
      calls: t.calls,
      requests: t.requests,
      amplification: ratio(t.requests, t.calls, 2),
      amplificationDuringTrigger: ratio(t.triggerRequests, t.triggerCalls, 2),
      successRate: ratio(t.ok, t.calls, 4),
    };
  }

  /** Seconds in which nothing started or finished keep the last sample. */
  #fillForward() {
    for (const a of [this.series.inService, this.series.queued]) {
      let last = 0;
      for (let i = 0; i < a.length; i++) {
        if (a[i]! < 0) a[i] = last;
        else last = a[i]!;
      }
    }
  }

  result(
    stack: { name: string; fallback?: boolean | undefined; engine?: boolean | undefined },
    prices: Price,
    calm?: readonly number[],
  ): StackResult {
    this.#fillForward();
    const billed = this.#billed.inputTokens + this.#billed.outputTokens;
    const used = this.#used.inputTokens + this.#used.outputTokens;
    const wasted = {
      inputTokens: this.#billed.inputTokens - this.#used.inputTokens,
      outputTokens: this.#billed.outputTokens - this.#used.outputTokens,
    };
    const price = (u: Usage) =>
      (u.inputTokens * prices.inputPerMillion + u.outputTokens * prices.outputPerMillion) / 1e6;
    const waits = [...this.#waits].sort((a, b) => a - b);
    const q = (p: number) =>
      waits.length === 0
        ? 0
        : waits[Math.min(waits.length - 1, Math.floor(p * waits.length))]! / 1000;
    return {
      stack: stack.name,
      fallback: stack.fallback === true,
      ...(stack.engine === true && { engine: true }),
      logicalCalls: this.#calls,
      providerRequests: this.#requests,
      amplification: round(this.#calls === 0 ? 0 : this.#requests / this.#calls, 2),
      amplificationDuringTrigger: round(
        this.#triggerCalls === 0 ? 0 : this.#triggerRequests / this.#triggerCalls,
        2,
      ),
      successRate: round(this.#decided === 0 ? 0 : this.#ok / this.#decided, 4),
      userWaitS: { p50: round(q(0.5), 1), p99: round(q(0.99), 1) },
      turns: {
        patienceS: this.#scenario.users.patienceS,
        trigger: turnScore(this.#firstTurns.trigger, this.#scenario.users.patienceS),
        after: turnScore(this.#firstTurns.after, this.#scenario.users.patienceS),
      },
      tokens: { billed, used, wasted: billed - used },
      cost: { billed: round(price(this.#billed), 2), wasted: round(price(wasted), 2) },
      duplicateSideEffects: this.duplicateSideEffects,
      ...(this.#scenario.tool && { tool: this.#toolResult() }),
      recoveryS: recoverySeconds(this.series.goodput, this.#scenario, calm),
      loadAfterTrigger: loadAfter(this.series.requests, this.#scenario),
      goodputDuringTrigger: meanOver(this.series.goodput, this.#scenario),
      refusedAfterTrigger: refusedAfter(this.series, this.#scenario),
      rejections: { ...this.#rejections },
      fallbackRequests: this.#fallbackRequests,
      series: this.series,
    };
  }
}

/** The share of `waits` (ms; NaN: never answered) answered within each T, and the waits of
 * those answered. */
export function turnScore(waits: readonly number[], patienceS: number): TurnScore {
  const answered = waits.filter((w) => !Number.isNaN(w)).sort((a, b) => a - b);
  const share = (s: number) => {
    let k = 0;
    while (k < answered.length && answered[k]! <= s * 1000) k++;
    return ratio(k, waits.length, 4);
  };
  const q = (p: number) =>
    answered.length === 0
      ? 0
      : round(answered[Math.min(answered.length - 1, Math.floor(p * answered.length))]! / 1000, 1);
  return {
    begun: waits.length,
    within: { s20: share(20), s30: share(30), s60: share(60), patience: share(patienceS) },
    curve: Array.from({ length: patienceS + 1 }, (_, s) => share(s)),
    answeredWaitS: { p50: q(0.5), p90: q(0.9) },
  };
}

const ratio = (a: number, b: number, digits: number) => (b === 0 ? 0 : round(a / b, digits));

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

/** The mean per second of `series` while the trigger lasted (in its windows, if several). */
export function meanOver(series: readonly number[], scenario: Scenario): number {
  const t = scenario.trigger;
  let sum = 0;
  let n = 0;
  for (let s = t.startS; s < Math.min(series.length, t.endS); s++) {
    if (!inTrigger(t, s * 1000)) continue;
    sum += series[s]!;
    n++;
  }
  return round(sum / Math.max(1, n), 1);
}

/** Requests refused over requests sent, in the 60 s after the trigger. */
export function refusedAfter(series: Series, scenario: Scenario): number {
  const { endS } = scenario.trigger;
  const sum = (a: readonly number[]) =>
    a.slice(endS, Math.min(a.length, endS + 60)).reduce((x, y) => x + y, 0);
  const sent = sum(series.requests);
  return sent === 0 ? 0 : round(sum(series.rejected) / sent, 4);
}

/** Mean requests/s in the 60 s after the trigger over the mean in the 40 s before it. */
export function loadAfter(requests: readonly number[], scenario: Scenario): number {
  const { startS, endS } = scenario.trigger;
  const mean = (a: readonly number[]) => a.reduce((x, y) => x + y, 0) / Math.max(1, a.length);
  const before = mean(requests.slice(Math.max(0, startS - 40), startS));
  const after = mean(requests.slice(endS, Math.min(requests.length, endS + 60)));
  return before === 0 ? 0 : round(after / before, 2);
}

/**
 * Seconds from the trigger's end until goodput's 10-second sum is back to what the same
 * users got in a calm run (the same seed, no trigger): at least 95% of it, or within two
 * standard errors of a Poisson count of it, whichever is lower. Measured against the calm
 * run, a dip in the users' own arrivals is not taken for the provider's trouble. Without a
 * calm run, the level before the trigger stands in. Null if never within the run.
 */
export function recoverySeconds(
  goodput: readonly number[],
  scenario: Scenario,
  calm?: readonly number[],
): number | null {
  const { startS, endS } = scenario.trigger;
  const from = Math.max(0, Math.min(20, startS - 10));
  const before = goodput.slice(from, startS);
  const level = before.reduce((a, b) => a + b, 0) / Math.max(1, before.length);
  const sum = (a: readonly number[], s: number) => a.slice(s, s + 10).reduce((x, y) => x + y, 0);
  for (let s = endS; s + 10 <= goodput.length; s++) {
    const expected = calm ? sum(calm, s) : level * 10;
    if (sum(goodput, s) >= Math.min(0.95 * expected, expected - 2 * Math.sqrt(expected)))
      return s - endS;
  }
  return null;
}
