import { createRequire } from "node:module";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { Agent, OpenAIProvider, Runner, retryPolicies, setTracingDisabled } from "@openai/agents";
import { generateText } from "ai";
import { createFallback } from "ai-fallback";
import { createRetryableModel, error, httpStatus } from "ai-retry/language-model";
import { createAgent, modelFallbackMiddleware, modelRetryMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../src/index.ts";
import { AiFallbackModel, aiFallbackCall } from "../../src/storm/peers/ai-fallback.ts";
import {
  aiFallback,
  aiRetry,
  aiRetryFallback,
  langchainV1,
  langchainV1Fallback,
  openaiAgents,
} from "../../src/storm/stacks.ts";
import { SimHttpError, type StormStack } from "../../src/storm/types.ts";
import { type FaultServer, mulberry32 } from "../../src/testing/index.ts";
import { onFaultServer } from "../helpers.ts";

setTracingDisabled(true);

/** The openai client @openai/agents 0.20 depends on (7.x), not this project's own (6.x). */
const OPENAI_7 = pathToFileURL(
  createRequire(createRequire(import.meta.url).resolve("@openai/agents-openai")).resolve("openai"),
).href;

/** The two faults each peer is checked under: half the requests fail with a 503, or with a
 * 429 that asks for a second. The message says nothing of overload (a stack that reads
 * wording reads the same on both sides). */
const FAULTS = {
  "503": { status: 503, retryAfter: undefined, message: "Service unavailable" },
  "429": { status: 429, retryAfter: 1, message: "Rate limit reached" },
  "529": { status: 529, retryAfter: undefined, message: "Service unavailable" },
  /** A spent key: 429 insufficient_quota, in the provider's own words. */
  quota: { status: 429, retryAfter: undefined, message: undefined },
  /** No answer before the app's per-attempt timeout (1 s; the answer takes 3 s). The
   * healthy answer comes at once: 40 calls through a heavy client on a loaded machine
   * still answer well within the timeout. */
  timeout: { status: undefined, retryAfter: undefined, message: undefined },
} as const;
type Fault = keyof typeof FAULTS;
const ALL = Object.keys(FAULTS) as Fault[];
/** The main cases (503, 429) with `n` calls; the others with fewer. */
const sample = (fault: Fault, n: number) => (fault === "503" || fault === "429" ? n : 40);

/** The app's per-attempt timeout in the timeout case, and how late the answer is. */
const TIMEOUT_MS = 1_000;
const SLOW_MS = 3_000;

/** The simulated provider's failure for `fault`. */
function simError(fault: Fault): Error {
  if (fault === "quota") return new SimHttpError(429, "quota");
  const f = FAULTS[fault];
  return Object.assign(new SimHttpError(f.status!, "injected", f.retryAfter), {
    message: f.message,
  });
}

/** Mean and spread of a sample. */
function moments(xs: readonly number[]) {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length);
  return { mean, sd };
}

/**
 * The storm's stack against a simulated provider that fails half its requests with
 * `fault` (and a second provider that never fails), `calls` logical calls in virtual time:
 * requests per call at each provider, their spread, and the share answered.
 */
async function simulated(stack: StormStack, fault: Fault, calls = 4_000) {
  const clock = new VirtualClock();
  const random = mulberry32(5);
  const perCall = { primary: [] as number[], secondary: [] as number[] };
  const usage = { inputTokens: 10, outputTokens: 10 };
  type Counted = { counts: { primary: number; secondary: number } };
  const provider = (side: "primary" | "secondary", fails: boolean) => ({
    // Each request carries its logical call's counts (stacks pass the request on).
    call: async (request: object) => {
      (request as Counted).counts[side]++;
      const fail = fails && random() < 0.5;
      await clock.sleep(fail && fault === "timeout" ? SLOW_MS : 100);
      if (fail && fault !== "timeout") throw simError(fault);
      return usage;
    },
  });
  const client = stack.create({
    clock,
    random: mulberry32(9),
    provider: provider("primary", true),
    fallback: provider("secondary", false),
    tool: { call: () => Promise.reject(new Error("no tool here")) },
    ...(fault === "timeout" && { attemptTimeoutMs: TIMEOUT_MS }),
  });
  const turn = { id: 1, startedAt: 0, patienceMs: 90_000, state: new Map() };
  const runs: Promise<boolean>[] = [];
  for (let i = 0; i < calls; i++) {
    const counts = { primary: 0, secondary: 0 };
    runs.push(
      client.model({ inputTokens: 10, outputTokens: 10, counts } as never, { turn }).then(
        () => true,
        () => false,
      ),
    );
    // Counted when the call is over (its retries may come later in virtual time).
    void runs.at(-1)!.then(() => {
      perCall.primary.push(counts.primary);
      perCall.secondary.push(counts.secondary);
    });
  }
  await clock.runAll();
  const ok = (await Promise.all(runs)).filter(Boolean).length;
  return {
    primary: moments(perCall.primary),
    secondary: moments(perCall.secondary),
    success: ok / calls,
  };
}

/** `n` logical calls at once through a real client against the fault server, with
 * `model` failing as `fault` says (the other model healthy): requests per call to each
 * model, and the share answered (`answered` reads a result as an answer or not).
 *
 * The fault server and the client share this process: stalled long enough (a loaded
 * machine), the process runs its expired timers before it reads the answers waiting on
 * its sockets, and a healthy answer is cut as if it were late. Such a sample measures the
 * machine, not the package's loop: one in which the event loop stalled for half the app's
 * timeout (in the timeout case), or a healthy answer was cut, is drawn again (at most
 * twice, said in the log; the tests' time limits allow three draws on a busy machine). */
async function real(
  server: FaultServer,
  fault: Fault,
  n: number,
  call: () => Promise<unknown>,
  answered: (result: unknown) => boolean = () => true,
  failing = "gpt-4o",
) {
  for (let draw = 1; ; draw++) {
    const stall = monitorEventLoopDelay({ resolution: 10 });
    stall.enable();
    const r = await sampleOnce(server, fault, n, call, answered, failing);
    stall.disable();
    const stalledMs = stall.max / 1e6;
    // A stall matters only where the app has a timeout to cut an answer with; so does a
    // call whose timer fired before its first request left (every stack sends at least one
    // a call: fewer requests than calls is a loaded machine, not the retry loop).
    const stalled = fault === "timeout" && stalledMs >= TIMEOUT_MS / 2;
    const unsent = Math.max(0, n - r.requests);
    if ((r.healthyCut === 0 && !stalled && unsent === 0) || draw === 3) return r;
    console.log(
      `${fault}: the loop stalled ${Math.round(stalledMs)} ms, ${r.healthyCut} healthy answers cut, at least ${unsent} calls sent nothing; drawn again`,
    );
    // A request the loaded machine sent late must land before the next draw counts.
    await new Promise((ok) => setTimeout(ok, SLOW_MS + TIMEOUT_MS));
  }
}

async function sampleOnce(
  server: FaultServer,
  fault: Fault,
  n: number,
  call: () => Promise<unknown>,
  answered: (result: unknown) => boolean,
  failing: string,
) {
  const f = FAULTS[fault];
  const shape =
    fault === "timeout"
      ? { headersDelayMs: SLOW_MS }
      : fault === "quota"
        ? { status: 429, error: "insufficient_quota" }
        : {
            status: f.status,
            message: f.message,
            ...(f.retryAfter !== undefined && { retryAfter: f.retryAfter }),
          };
  server.setScript({
    seed: 11,
    rules: [{ route: "openai", model: failing, probability: 0.5, ...shape } as never],
  });
  server.resetStats();
  const ok = await Promise.all(
    Array.from({ length: n }, () =>
      call().then(
        (r) => answered(r),
        () => false,
      ),
    ),
  );
  const timeline = server.stats().timeline;
  const at = (m: string) => timeline.filter((a) => a.model === m).length / n;
  return {
    primary: at(failing),
    secondary: timeline.length / n - at(failing),
    success: ok.filter(Boolean).length / n,
    requests: timeline.length,
    healthyCut: timeline.filter((a) => a.rule === undefined && a.outcome === "aborted").length,
    // What each request met, faulted or not: printed beside the comparison, to read a miss.
    outcomes: timeline.reduce<Record<string, number>>((o, a) => {
      const k = `${a.rule === undefined ? "healthy" : "faulted"} ${a.outcome}`;
      o[k] = (o[k] ?? 0) + 1;
      return o;
    }, {}),
  };
}

/** Four standard errors of a mean over `n` draws with spread `sd`: a real sample this far
 * from the model means the model is wrong, not unlucky. */
const band = (sd: number, n: number) => (4 * Math.max(sd, 0.05)) / Math.sqrt(n);

async function agree(
  stack: StormStack,
  fault: Fault,
  n: number,
  r: Awaited<ReturnType<typeof real>>,
) {
  const sim = await simulated(stack, fault);
  console.log(stack.name, fault, "real", r, "simulated", {
    primary: sim.primary.mean,
    secondary: sim.secondary.mean,
    success: sim.success,
  });
  // A row that always answers has no spread: a socket error or two on a busy machine is
  // still not the model being wrong.
  const spread = Math.max(0.1, Math.sqrt(sim.success * (1 - sim.success)));
  expect(Math.abs(r.primary - sim.primary.mean), "requests per call").toBeLessThan(
    band(sim.primary.sd, n),
  );
  expect(Math.abs(r.secondary - sim.secondary.mean), "fallback requests per call").toBeLessThan(
    band(sim.secondary.sd, n),
  );
  expect(Math.abs(r.success - sim.success), "success").toBeLessThan(band(spread, n));
  return sim;
}

/** The ai-fallback row's loop with a model of its own per call (what the real check makes). */
const aiFallbackPerCall: StormStack = {
  ...aiFallback,
  create: (ctx) => {
    const base = aiFallback.create(ctx);
    const loop = { clock: ctx.clock, random: ctx.random, timeoutMs: ctx.attemptTimeoutMs };
    return {
      ...base,
      model: (request, { signal }) =>
        aiFallbackCall(new AiFallbackModel(ctx.clock, 2), loop, signal, [
          (s) => ctx.provider.call(request, s),
          (s) => ctx.fallback.call(request, s),
        ]),
    };
  },
};

/** The status faults: their cases wait on the packages' real backoff (seconds each, little
 * CPU), so they run side by side, each on a fault server of its own. The timeout cases read
 * how late an answer is and run one at a time, after them. */
const STATUS = ["503", "429", "529", "quota"] as const satisfies readonly Fault[];

const ai = (server: FaultServer) => createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "test" });
const retrySame = () => error.isRetryable(true).retry({ delay: 1_000, backoffFactor: 2 });

/** A retryable model's call, with the app's timeout on its signal in the timeout case
 * (a retryable model applies a deadline through the call's AbortSignal). */
const generate = (fault: Fault, model: Parameters<typeof generateText>[0]["model"]) =>
  generateText({
    model,
    prompt: "hi",
    maxRetries: 0,
    ...(fault === "timeout" && { abortSignal: AbortSignal.timeout(TIMEOUT_MS) }),
  });

/** A ChatOpenAI model; the app's per-attempt timeout is the client's `timeout`. */
const chat = (server: FaultServer, model: string, fault?: Fault) =>
  new ChatOpenAI({
    model,
    apiKey: "test",
    configuration: { baseURL: `${server.url}/v1` },
    ...(fault === "timeout" && { timeout: TIMEOUT_MS }),
  });
/** The agent's answer, not the error text `onFailure: "continue"` answers with. */
const answeredByModel = (r: unknown) => {
  const last = (r as { messages: { content: unknown }[] }).messages.at(-1)!;
  return !String(last.content).startsWith("Model call failed after");
};

/** An agent's turn with `middleware`, against the fault server. */
const agent =
  (
    server: FaultServer,
    fault: Fault,
    middleware: Parameters<typeof createAgent>[0]["middleware"],
  ) =>
  () =>
    createAgent({ model: chat(server, "gpt-4o", fault), tools: [], middleware }).invoke({
      messages: [{ role: "user", content: "hi" }],
    });

/** Each peer's case under `fault`; `concurrent` for the status faults. */
const CASES = {
  async aiRetry(fault: Fault) {
    await onFaultServer(async (server) => {
      const p = ai(server);
      const n = sample(fault, 100);
      // One retryable model per call: 2.4.0 shares its current model across concurrent
      // calls on one instance (see peers/ai-retry.ts); the storm models one call's loop.
      const r = await real(server, fault, n, () =>
        generate(fault, createRetryableModel({ model: p.chat("gpt-4o"), retries: [retrySame()] })),
      );
      const sim = await agree(aiRetry, fault, n, r);
      if (fault === "503") expect(sim.primary.mean).toBeCloseTo(1.5, 1); // two attempts
      if (fault === "timeout") expect(sim.primary.mean).toBe(1); // never retried
    });
  },
  async aiRetryFallback(fault: Fault) {
    await onFaultServer(async (server) => {
      const p = ai(server);
      const n = sample(fault, 100);
      const r = await real(server, fault, n, () =>
        generate(
          fault,
          createRetryableModel({
            model: p.chat("gpt-4o"),
            retries: [
              httpStatus(529, "overloaded").switch({ model: p.chat("gpt-4o-mini") }),
              retrySame(),
              p.chat("gpt-4o-mini"),
            ],
          }),
        ),
      );
      await agree(aiRetryFallback, fault, n, r);
    });
  },
  async langchainV1(fault: Fault) {
    await onFaultServer(async (server) => {
      const n = sample(fault, 60);
      const turn = agent(server, fault, [modelRetryMiddleware()]);
      const r = await real(server, fault, n, turn, answeredByModel);
      const sim = await agree(langchainV1, fault, n, r);
      if (fault === "503") expect(sim.primary.mean).toBeCloseTo(1.75, 1); // three attempts
    });
  },
  async langchainV1Fallback(fault: Fault) {
    await onFaultServer(async (server) => {
      const n = sample(fault, 60);
      const middleware = [
        modelRetryMiddleware(),
        modelFallbackMiddleware(chat(server, "gpt-4o-mini", fault)),
      ];
      const r = await real(server, fault, n, agent(server, fault, middleware), answeredByModel);
      await agree(langchainV1Fallback, fault, n, r);
    });
  },
  async aiFallback(fault: Fault) {
    await onFaultServer(async (server) => {
      const p = ai(server);
      const n = sample(fault, 100);
      // One fallback model per call, as the storm's per-call loop below: 3.0.0 keeps the
      // model calls go to in the shared model object (the storm's row shares one, as an app
      // does; its stickiness is checked one call at a time, below).
      const r = await real(server, fault, n, () =>
        generateText({
          model: createFallback({ models: [p.chat("gpt-4o"), p.chat("gpt-4o-mini")] }),
          prompt: "hi",
        }),
      );
      const sim = await agree(aiFallbackPerCall, fault, n, r);
      // generateText's 3 passes, each the primary then the second on a 503: 1 + 1/2 + ...
      if (fault === "503") expect(sim.secondary.mean).toBeCloseTo(0.5, 1);
    });
  },
  async openaiAgents(fault: Fault) {
    await onFaultServer(async (server) => {
      const n = sample(fault, 100);
      // The app's per-attempt timeout is the client's: the openai 7 client the SDK ships.
      const { default: OpenAI7 } = await import(OPENAI_7);
      const client = new OpenAI7({
        apiKey: "test",
        baseURL: `${server.url}/v1`,
        ...(fault === "timeout" && { timeout: TIMEOUT_MS }),
      });
      const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: client }) });
      const agent = new Agent({
        name: "a",
        instructions: "be brief",
        model: "gpt-4o",
        modelSettings: {
          retry: {
            maxRetries: 4,
            backoff: { initialDelayMs: 500, maxDelayMs: 5_000, multiplier: 2, jitter: true },
            policy: retryPolicies.any(
              retryPolicies.providerSuggested(),
              retryPolicies.retryAfter(),
              retryPolicies.networkError(),
              retryPolicies.httpStatus([408, 409, 429, 500, 502, 503, 504]),
            ),
          },
        },
      });
      const r = await real(server, fault, n, () => runner.run(agent, "hi"));
      const sim = await agree(openaiAgents, fault, n, r);
      // Up to 7 requests: the client's own 3 in the first runner attempt, then 4 more.
      if (fault === "503") expect(sim.primary.mean).toBeCloseTo(2 - 2 ** -6, 1);
    });
  },
};

/** The cases' titles, each with the faults it is checked under. */
const TITLES: [keyof typeof CASES, string, readonly Fault[]][] = [
  ["aiRetry", "ai-retry 2.4, its README's retry, under %s", ALL],
  [
    "aiRetryFallback",
    "ai-retry 2.4 with a fallback model, under %s at the primary",
    ["503", "429", "529", "timeout"],
  ],
  ["langchainV1", "LangChain v1 createAgent with modelRetryMiddleware(), under %s", ALL],
  [
    "langchainV1Fallback",
    "LangChain v1 with modelRetryMiddleware() then modelFallbackMiddleware(), under %s",
    ["503", "429", "timeout"],
  ],
  ["openaiAgents", "the OpenAI Agents SDK 0.20 with its documented retry settings, under %s", ALL],
  ["aiFallback", "ai-fallback 3.0 over a second model, under %s at the primary", STATUS],
];

describe.concurrent("the 2026 peers' stacks behave as the real packages do (fault server, p = 0.5)", () => {
  for (const [name, title, faults] of TITLES) {
    const status = faults.filter((f) => (STATUS as readonly Fault[]).includes(f));
    it.each(status)(title, (fault) => CASES[name](fault), 120_000);
  }
});

describe("the same, the app's timeout cut short by a late answer (one at a time)", () => {
  for (const [name, title, faults] of TITLES)
    if (faults.includes("timeout"))
      it(title.replace("%s", "timeout"), () => CASES[name]("timeout"), 120_000);
});

describe("ai-fallback 3.0 keeps to the second model after a switch, as the storm's row does", () => {
  it("one model shared by calls made one at a time: the primary down, one request to it, then none", async () => {
    await onFaultServer(async (server) => {
      server.setScript({ rules: [{ route: "openai", model: "gpt-4o", status: 503 }] });
      const p = ai(server);
      const model = createFallback({ models: [p.chat("gpt-4o"), p.chat("gpt-4o-mini")] });
      for (let i = 0; i < 5; i++) await generateText({ model, prompt: "hi", maxRetries: 0 });
      const at = (m: string) => server.stats().timeline.filter((a) => a.model === m).length;
      expect([at("gpt-4o"), at("gpt-4o-mini")]).toEqual([1, 5]);
      // The storm's model of it, the same five calls in a row.
      const clock = new VirtualClock();
      const sim = new AiFallbackModel(clock, 2);
      const sent = [0, 0];
      const send = [0, 1].map((i) => async () => {
        sent[i]!++;
        if (i === 0) throw new SimHttpError(503, "injected");
        return "ok";
      });
      for (let i = 0; i < 5; i++) await sim.generate(send, undefined);
      expect(sent).toEqual([1, 5]);
      // Three minutes after its last reset it tries the primary again, once, and switches back.
      await clock.advance(180_000);
      await sim.generate(send, undefined);
      expect(sent).toEqual([2, 6]);
    });
  }, 60_000);
});
