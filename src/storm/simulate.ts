import { type Usage, VirtualClock } from "../index.ts";
import { mulberry32 } from "../testing/index.ts";
import { type Arrival, meanRate } from "./arrivals.ts";
import { Draws } from "./draws.ts";
import { Metrics, type StackResult } from "./metrics.ts";
import { SimProvider } from "./provider.ts";
import { inTrigger, type ProviderSpec, type Scenario } from "./scenarios.ts";
import { SimTool } from "./tool.ts";
import type { StackClient, StormStack, TurnInfo } from "./types.ts";

/** How long one model call takes when nothing goes wrong, in ms (a call of mean size). */
export function expectedCallMs(scenario: Scenario): number {
  const { users: u, provider: p } = scenario;
  const out = (u.outputTokens[0] + u.outputTokens[1]) / 2;
  const input = Math.min(
    u.inputTokens.max,
    u.inputTokens.base + (u.inputTokens.perCall * u.modelCallsPerTurn * u.turnsPerConversation) / 2,
  );
  return p.ttftMs + out * p.perOutputTokenMs + input * p.perInputTokenMs;
}

/** How long a turn takes when nothing goes wrong: its calls back to back. */
export function expectedTurnS(scenario: Scenario): number {
  const u = scenario.users;
  // Subagents run side by side: the fan-out takes one call's time.
  const sequential = u.modelCallsPerTurn + ((u.subagentsPerTurn ?? 0) > 0 ? 1 : 0);
  const calls = sequential * expectedCallMs(scenario);
  return (calls + (scenario.tool?.latencyMs ?? 0) * u.toolCallsPerTurn) / 1000;
}

/** How long a conversation lasts when nothing goes wrong (for the arrival rate). */
export function expectedConversationS(scenario: Scenario): number {
  const u = scenario.users;
  const thinkS = (u.thinkS[0] + u.thinkS[1]) / 2;
  return u.turnsPerConversation * expectedTurnS(scenario) + (u.turnsPerConversation - 1) * thinkS;
}

/** Options of one simulation: a scenario, a stack and a seed. */
export interface SimulateOptions {
  seed: number;
  /** Goodput per second of a calm run (the same seed, no trigger), to measure recovery
   * against what the same users would have got. */
  calm?: readonly number[];
  /** Called with the share of simulated time done, [0, 1]. */
  onProgress?: (done: number) => void;
}

/** Independent seeded streams: the provider's, the stack's, and one per user, so that every
 * stack meets the same users making the same requests at the same moments of their own
 * conversations. */
function streams(seed: number) {
  return {
    world: mulberry32(seed),
    stack: mulberry32(seed ^ 0x5bd1e995),
    user: (i: number) => mulberry32((seed * 7919 + i * 104_729 + 1) >>> 0),
    fallback: mulberry32((seed * 31_337 + 7) >>> 0),
  };
}

/** A trigger that never fires: the fallback provider is healthy throughout. */
const CALM = { startS: 0, endS: 0 };

/** The calls per second the users make when the provider is healthy (a replay: its
 * requests over the trigger, or the whole log when it has none). */
export function offeredCallRate(scenario: Scenario): number {
  const log = scenario.arrivals;
  if (log !== undefined) {
    const t = scenario.trigger;
    const inIt = log.filter((a) => inTrigger(t, a.atMs)).length;
    const span = windowsOf(t).reduce((s, [a, b]) => s + (b - a), 0);
    return span > 0 ? inIt / span : meanRate(log);
  }
  const u = scenario.users;
  return (
    (u.conversations * u.turnsPerConversation * (u.modelCallsPerTurn + (u.subagentsPerTurn ?? 0))) /
    expectedConversationS(scenario)
  );
}

/** A trigger's windows, in seconds. */
export const windowsOf = (t: Scenario["trigger"]): readonly (readonly [number, number])[] =>
  t.windows ?? [[t.startS, t.endS]];

/**
 * What the provider could answer per second while the trigger lasted: the calls its
 * remaining slots serve at the trigger's latency, net of the requests its trigger refuses
 * outright, and never more than the users ask for.
 */
export function capacityGoodput(scenario: Scenario): number {
  const { provider: p, trigger: t } = scenario;
  const serviceS = (meanCallMs(scenario) * (t.latencyFactor ?? 1)) / 1000;
  const slots = Math.max(1, Math.round(p.maxConcurrent * (t.capacityFactor ?? 1)));
  const limit = t.rateLimit ? t.rateLimit.perWindow / t.rateLimit.windowS : Infinity;
  const timedOut = scenario.attemptTimeoutS !== undefined && serviceS > scenario.attemptTimeoutS;
  const served = timedOut ? 0 : Math.min(slots / serviceS, limit);
  // Calls on a spent key can never be answered.
  const askable = offeredCallRate(scenario) * (1 - (t.rateLimit?.quotaShare ?? 0));
  return Math.round(Math.min(askable, served) * 10) / 10;
}

/** How long a call of mean size takes when nothing goes wrong, in ms (a replay: its own). */
function meanCallMs(scenario: Scenario): number {
  const log = scenario.arrivals;
  if (log === undefined || log.length === 0) return expectedCallMs(scenario);
  return logCallMs(log, scenario.provider);
}

/** How long a call of `log` takes on `p` when nothing goes wrong, in ms, on average. */
export function logCallMs(log: readonly Arrival[], p: ProviderSpec): number {
  const sum = log.reduce(
    (s, a) =>
      s + p.ttftMs + a.outputTokens * p.perOutputTokenMs + a.inputTokens * p.perInputTokenMs,
    0,
  );
  return sum / Math.max(1, log.length);
}

const between = (r: () => number, [a, b]: [number, number]) => a + r() * (b - a);

/** Identities: a turn is its conversation's index × TURNS + its place; a model call, its
 * turn's × CALLS + its place in the turn (below 2^53 for a million conversations). */
const TURNS = 4096;
const CALLS = 4096;

/** One turn under way: its info for the stack, the user's patience, and how it ends. */
interface TurnCtx {
  readonly info: TurnInfo;
  /** The turn's identity, the same under every stack: its conversation and place in it. */
  readonly order: number;
  /** The model calls the turn has made so far (a call's identity is the turn's and this). */
  calls: number;
  /** The conversation's context depth: its model calls so far. */
  depth: number;
  /** A replayed request: the turn is its one call, with its tokens. */
  readonly arrival: Arrival | undefined;
  readonly client: StackClient;
  readonly random: () => number;
  readonly key: number;
  /** Aborts when the user stops waiting; passed on only to stacks that propagate it. */
  readonly signal: AbortSignal | undefined;
  /** Rejects when the user gives up. */
  readonly gaveUp: Promise<never>;
  /** The user still waits. */
  waiting(): boolean;
}

/** The steps of a turn: the model calls, with the tool calls and the fan-out after the first. */
function turnSteps(u: Scenario["users"]): ("model" | "tool" | "fan-out")[] {
  const steps: ("model" | "tool" | "fan-out")[] = [];
  for (let i = 0; i < u.modelCallsPerTurn; i++) {
    steps.push("model");
    if (i === 0) for (let k = 0; k < u.toolCallsPerTurn; k++) steps.push("tool");
    if (i === 0 && (u.subagentsPerTurn ?? 0) > 0) steps.push("fan-out");
  }
  return steps;
}

/**
 * One scenario against one stack, in virtual time: the stack's real policy objects against a
 * simulated provider and a population of users. Deterministic for a seed.
 */
class Simulation {
  readonly #scenario: Scenario;
  readonly #stack: StormStack;
  readonly #options: SimulateOptions;
  readonly #warmupMs: number;
  readonly #endMs: number;
  /** Users arrive and begin turns until then: the end, or later while scored turns are open. */
  #openMs: number;
  readonly #turnMs: number;
  readonly #clock: VirtualClock;
  readonly #r: ReturnType<typeof streams>;
  readonly #metrics: Metrics;
  readonly #client: StackClient;
  readonly #stop = new AbortController();
  #turns = 0;

  constructor(scenario: Scenario, stack: StormStack, options: SimulateOptions) {
    this.#scenario = scenario;
    this.#stack = stack;
    this.#options = options;
    // A replay starts as its log does; a population, two conversation lifetimes early.
    this.#warmupMs =
      scenario.arrivals === undefined ? Math.ceil(2 * expectedConversationS(scenario)) * 1000 : 0;
    this.#endMs = scenario.durationS * 1000;
    this.#openMs = this.#endMs;
    this.#turnMs = expectedTurnS(scenario) * 1000;
    // Millions of timers: up to 1024 a turn of the event loop (the turns were half its time).
    const clock = new VirtualClock(-this.#warmupMs, { perTurn: 1024 });
    this.#clock = clock;
    const r = streams(options.seed);
    this.#r = r;
    const metrics = new Metrics(scenario);
    this.#metrics = metrics;
    // Each provider draws from the seed and its own salt (common random numbers, draws.ts).
    const draws = new Draws(options.seed * 2 + 1, r.world);
    const world = { clock, trigger: scenario.trigger, draws, metrics, meter: metrics };
    const fallback = new SimProvider(
      {
        clock,
        trigger: CALM,
        draws: new Draws(options.seed * 2 + 2, r.fallback),
        metrics,
        meter: metrics.fallbackMeter(),
      },
      scenario.provider,
    );
    const timeout = scenario.attemptTimeoutS;
    this.#client = stack.create({
      clock,
      random: r.stack,
      provider: new SimProvider(world, scenario.provider),
      tool: new SimTool(world, scenario.tool),
      fallback,
      ...(timeout !== undefined && { attemptTimeoutMs: timeout * 1000 }),
    });
  }

  /**
   * Open-loop arrivals: new conversations arrive as a Poisson process at the rate that
   * keeps `conversations` running when the provider is healthy (Little's law), and do not
   * slow down when the provider does: that is what lets an overload feed itself. The clock
   * starts two conversation lifetimes before 0 so the run begins in that steady state;
   * nothing before 0 is measured.
   */
  async run(): Promise<StackResult> {
    const clock = this.#clock;
    const endMs = this.#endMs;
    if (this.#scenario.arrivals === undefined) this.#poisson();
    else this.#replay(this.#scenario.arrivals);
    const sliceMs = 5_000;
    const warmupMs = this.#warmupMs;
    for (let t = -warmupMs; t < endMs; t += sliceMs) {
      await clock.advance(Math.min(sliceMs, endMs - t));
      const done = (t + sliceMs + warmupMs) / (endMs + warmupMs);
      this.#options.onProgress?.(Math.min(1, Math.max(0, done)));
    }
    // The first turns still open are scored as they end (within a patience), so every stack
    // is scored on the same turns; the users go on meanwhile, as they would have, but
    // nothing else past the end is measured.
    this.#openMs = endMs + this.#scenario.users.patienceS * 1000 + sliceMs;
    while (this.#metrics.firstTurnsOpen > 0 && clock.now() < this.#openMs)
      await clock.advance(sliceMs);
    this.#stop.abort();
    return this.#metrics.result(this.#stack, this.#scenario.prices, this.#options.calm);
  }

  /** Conversations arriving as a Poisson process (see `run`). */
  #poisson(): void {
    const clock = this.#clock;
    let conversations = 0;
    const rate = this.#scenario.users.conversations / expectedConversationS(this.#scenario);
    const arrivals = mulberry32((this.#options.seed * 31 + 17) >>> 0);
    const arrive = () => {
      if (clock.now() >= this.#openMs) return;
      void this.#conversation(conversations++).catch(() => {});
      clock.schedule((-Math.log(1 - arrivals()) / rate) * 1000, arrive);
    };
    clock.schedule((-Math.log(1 - arrivals()) / rate) * 1000, arrive);
  }

  /** A replayed log: each request a turn of one call at its own time, with its own tokens,
   * open-loop (the log's arrivals do not wait for the provider). One timer pending at a
   * time: the next arrival is scheduled as one arrives. */
  #replay(log: readonly Arrival[]): void {
    const clock = this.#clock;
    let i = 0;
    const next = () => {
      const a = log[i];
      if (a === undefined || a.atMs >= this.#openMs) return;
      clock.schedule(Math.max(0, a.atMs - clock.now()), () => {
        const index = i++;
        void this.#turn(0, this.#r.user(index), index, 0, a).catch(() => {});
        next();
      });
    };
    next();
  }

  /** A conversation: its turns at the user's own pace. A turn is due one expected turn
   * time plus a think time after the previous one was due; it starts then, or when the
   * previous turn ended if that is later (the user was still waiting). So a stack that
   * fails fast does not make users ask sooner, and one that is slow does delay them. Each
   * conversation's random stream is its own: every stack meets the same conversations. */
  async #conversation(index: number): Promise<void> {
    const u = this.#scenario.users;
    const clock = this.#clock;
    const random = this.#r.user(index);
    let depth = 0;
    let due = clock.now();
    for (let t = 0; t < u.turnsPerConversation && clock.now() < this.#openMs; t++) {
      if (t > 0) {
        due += this.#turnMs + between(random, u.thinkS) * 1000;
        if (due > clock.now()) await clock.sleep(due - clock.now(), this.#stop.signal);
      }
      depth = await this.#turn(depth, random, index, t);
    }
  }

  /** One turn (the conversation's `n`-th): its steps in order, within the user's patience.
   * Returns the context depth. A conversation's first turn is scored whole: answered or
   * not, and when. */
  async #turn(
    depth: number,
    random: () => number,
    key: number,
    n: number,
    arrival?: Arrival,
  ): Promise<number> {
    const clock = this.#clock;
    const u = this.#scenario.users;
    const started = clock.now();
    if (n === 0) this.#metrics.firstTurnBegan(started);
    const info: TurnInfo = {
      id: ++this.#turns,
      startedAt: started,
      patienceMs: u.patienceS * 1000,
      state: new Map(),
    };
    const leave = new AbortController();
    let waiting = true;
    const patience = clock.schedule(info.patienceMs, () => {
      waiting = false;
      leave.abort(new DOMException("the user gave up", "AbortError"));
    });
    const gaveUp = new Promise<never>((_, reject) =>
      leave.signal.addEventListener("abort", () => reject(leave.signal.reason), { once: true }),
    );
    gaveUp.catch(() => {});
    const signal = this.#stack.propagatesCancel ? leave.signal : undefined;
    const t: TurnCtx = {
      info,
      order: key * TURNS + n,
      calls: 0,
      depth,
      arrival,
      client: this.#client,
      random,
      key,
      signal,
      gaveUp,
      waiting: () => waiting,
    };
    let answered = false;
    try {
      answered = await this.#steps(t);
    } catch {
      // the turn failed or the user gave up: either way the user moves on
    } finally {
      patience();
      const waitMs = Math.min(clock.now() - started, info.patienceMs);
      this.#metrics.turnEnded(started, waitMs);
      if (n === 0) this.#metrics.firstTurnEnded(started, answered && waiting, waitMs);
    }
    return t.depth;
  }

  /** A turn's steps in order: whether all answered (a model call that fails throws; a tool
   * that fails ends the turn unanswered). Each model call deepens the context. */
  async #steps(t: TurnCtx): Promise<boolean> {
    const u = this.#scenario.users;
    if (t.arrival !== undefined) {
      await this.#model(t, t.arrival.inputTokens, undefined, t.arrival.outputTokens);
      return true;
    }
    for (const step of turnSteps(u)) {
      if (step === "tool") {
        if (!(await this.#tool(t))) return false;
      } else if (step === "fan-out") {
        // Parallel subagents, each with a fresh context: the turn goes on when all answer.
        const k = u.subagentsPerTurn ?? 0;
        await Promise.all(
          Array.from({ length: k }, (_, j) => this.#model(t, u.inputTokens.base, j)),
        );
      } else {
        const input = Math.min(
          u.inputTokens.max,
          u.inputTokens.base + u.inputTokens.perCall * t.depth++,
        );
        await this.#model(t, input);
      }
    }
    return true;
  }

  /** One tool call, measured: whether the turn goes on. */
  async #tool(t: TurnCtx): Promise<boolean> {
    const metrics = this.#metrics;
    const measured = metrics.toolCallStarted(this.#clock.now());
    const call = t.client.tool!({ order: t.order }, { signal: t.signal, turn: t.info });
    const ok = await Promise.race([call, t.gaveUp]);
    if (ok && measured && t.waiting()) metrics.toolCallSucceeded();
    return ok;
  }

  /** One model call, measured; it settles when the stack answers or the user leaves. */
  #model(
    t: TurnCtx,
    inputTokens: number,
    subagent?: number,
    outputTokens = Math.round(between(t.random, this.#scenario.users.outputTokens)),
  ): Promise<unknown> {
    const clock = this.#clock;
    const metrics = this.#metrics;
    const request = { id: t.order * CALLS + t.calls++, key: t.key, inputTokens, outputTokens };
    const measured = metrics.callStarted(clock.now());
    // A stack that ignores the user leaving keeps working (and retrying) after the user
    // stopped waiting; the call is decided as failed when the user leaves.
    let decided = false;
    const decide = (ok: boolean, usage?: Usage) => {
      if (decided) return;
      decided = true;
      metrics.callDecided(clock.now(), ok && t.waiting(), usage, measured);
    };
    const call = t.client.model(request, {
      signal: t.signal,
      turn: t.info,
      ...(subagent !== undefined && { subagent }),
    });
    call.then(
      (usage: Usage) => decide(true, usage),
      () => decide(false),
    );
    return Promise.race([call, t.gaveUp]).finally(() => {
      if (!t.waiting()) decide(false);
    });
  }
}

/**
 * One scenario against one stack, in virtual time: the stack's real policy objects against a
 * simulated provider and a population of users. Deterministic for a seed.
 */
export function simulate(
  scenario: Scenario,
  stack: StormStack,
  options: SimulateOptions,
): Promise<StackResult> {
  return new Simulation(scenario, stack, options).run();
}
