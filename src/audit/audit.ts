import { layerMark } from "../core/layer-mark.ts";
import { validator } from "../core/validate.ts";
import { type EngineSettings, engineLayers } from "./engines.ts";
import { agentsLayers, langchainAgentLayers, mastraLayers } from "./frameworks.ts";

export type { EngineSettings } from "./engines.ts";

/** One retry layer around a call, as the caller describes it. */
export interface LayerSpec {
  name: string;
  /** Attempts, including the first. */
  attempts: number;
  /** The longest wait before retry n (1-based), or a formula: base·factor^(n-1), capped. */
  waitsMs?: number[];
  backoff?: {
    baseMs: number;
    factor?: number;
    capMs?: number;
    jitter?: "full" | "none" | "up-to-2x";
  };
}

/** What `audit` can read off the live objects you hold. A client or model wrapped by a
 * breakwater adapter counts as breakwater's layer (its policy's attempts). */
export interface AuditClients extends EngineSettings {
  /** An `openai` client (reads `maxRetries`). */
  openai?: { maxRetries?: number };
  /** An `@anthropic-ai/sdk` client (reads `maxRetries`). */
  anthropic?: { maxRetries?: number };
  /** A `@google/genai` client (reads its http retry options). */
  google?: unknown;
  /** What you pass to generateText/streamText (its `maxRetries` defaults to 2;
   * `streamRetries`, off by default, calls the model again after an error part). */
  aiSdk?: { maxRetries?: number; streamRetries?: number };
  /** A LangChain chat model (reads its AsyncCaller's `maxRetries`, 6 by default). */
  langchain?: { caller?: { maxRetries?: number } };
  /** A langchain `createAgent` agent: its retry and fallback middleware, LangGraph's
   * retry policy on its model node, and its model. */
  langchainAgent?: object;
  /** An OpenAI Agents SDK `Runner` or `Agent`: each `modelSettings.retry` that retries. */
  agents?: object;
  /** A Mastra `Agent`: its `maxRetries` and its model list's. Counted as if its model were
   * not wrapped (audit cannot see through `wrapLanguageModel`). */
  mastra?: object;
}

/** One retry layer as `audit` reports it: its attempts and its longest total wait. */
export interface AuditLayer {
  name: string;
  attempts: number;
  worstWaitMs: number;
}

/** What `audit` found: the layers, what they multiply to, and the SDKs still retrying. */
export interface AuditReport {
  layers: AuditLayer[];
  /** The product of every layer's attempts: requests one logical call can send. */
  worstCaseRequests: number;
  /** The waits stacked as the layers nest them, at their longest. */
  worstCaseWaitMs: number;
  /** SDKs whose own retries are still on, and what to change. */
  warnings: string[];
}

function worstWait(l: LayerSpec): number {
  const retries = l.attempts - 1;
  if (retries === Number.POSITIVE_INFINITY) return retries; // an engine that never stops
  if (l.waitsMs) return l.waitsMs.slice(0, retries).reduce((a, b) => a + b, 0);
  if (!l.backoff) return 0;
  const { baseMs, factor = 2, capMs = Number.POSITIVE_INFINITY, jitter = "full" } = l.backoff;
  let sum = 0;
  for (let n = 1; n <= retries; n++) {
    const ceiling = Math.min(capMs, baseMs * factor ** (n - 1));
    sum += jitter === "up-to-2x" ? Math.min(capMs, ceiling * 2) : ceiling;
  }
  return sum;
}

/** A layer that retries, and the warning that it does when it does. */
function layer(warnings: string[], spec: LayerSpec, warning: string): LayerSpec {
  if (spec.attempts > 1) warnings.push(warning);
  return spec;
}

/** A layer counted in retries (`maxRetries`), with how to switch it off. */
function retrying(
  warnings: string[],
  who: string,
  name: string,
  retries: number,
  backoff: LayerSpec["backoff"],
  fix: string,
): LayerSpec {
  const warning = `${who} retries on its own (maxRetries ${retries}): ${fix}`;
  return layer(warnings, { name, attempts: retries + 1, backoff }, warning);
}

/** @google/genai's layer: one attempt unless retryOptions is set, then 5 by default. */
function googleLayer(warnings: string[], client: object): LayerSpec {
  const g = client as {
    apiClient?: { clientOptions?: { httpOptions?: { retryOptions?: { attempts?: number } } } };
  };
  const retry = g.apiClient?.clientOptions?.httpOptions?.retryOptions;
  const attempts = retry ? (retry.attempts ?? 5) : 1;
  const backoff = { baseMs: 1_000, capMs: 60_000, jitter: "up-to-2x" as const };
  return layer(
    warnings,
    { name: "google", attempts, backoff },
    `@google/genai retries on its own (${attempts} attempts): drop httpOptions.retryOptions or use breakwater/google`,
  );
}

/** openai-node and the anthropic SDK: min(0.5 s·2^n, 8 s), less up to 25% jitter. */
const STAINLESS = { baseMs: 500, capMs: 8_000, jitter: "none" as const };

/** Whether an adapter wrapped `x` (its mark): then its layer is breakwater's, added. */
function breakwaterLayer(out: LayerSpec[], x: unknown): boolean {
  const mark = layerMark(x);
  if (mark) out.push({ name: `breakwater (${mark.owner})`, attempts: mark.attempts });
  return mark !== undefined;
}

/** The frameworks' layers (agents first: they are outside the model call); a langchain
 * agent's model is then read as the `langchain` client, unless one is given. */
function frameworkLayers(c: AuditClients, out: LayerSpec[], warnings: string[]): AuditClients {
  const found = (f: { layer: LayerSpec; warning: string }[]) => {
    for (const x of f) out.push(layer(warnings, x.layer, x.warning));
  };
  if (c.agents) found(agentsLayers(c.agents));
  if (c.mastra) found(mastraLayers(c.mastra));
  if (!c.langchainAgent) return c;
  const agent = c.langchainAgent as { options?: { model?: unknown; middleware?: unknown } };
  found(langchainAgentLayers(agent));
  // Under breakwater's middleware, the model's own retries are off at each call.
  const middleware = Array.isArray(agent.options?.middleware) ? agent.options.middleware : [];
  const owned = middleware.some((m) => breakwaterLayer(out, m));
  const model = agent.options?.model;
  return !owned && model !== null && typeof model === "object" && !c.langchain
    ? { ...c, langchain: model as AuditClients["langchain"] }
    : c;
}

/** The SDKs' own retry layers, read off their clients (defaults from their sources). */
function clientLayers(c: AuditClients, warnings: string[]): LayerSpec[] {
  const out: LayerSpec[] = [];
  const wrapped = (x: unknown) => breakwaterLayer(out, x);
  const add = (...a: Parameters<typeof retrying> extends [string[], ...infer R] ? R : never) =>
    out.push(retrying(warnings, ...a));
  out.push(...engineLayers(c, warnings)); // the engines run everything below them
  c = frameworkLayers(c, out, warnings);
  // @langchain/core AsyncCaller: p-retry, 1 s doubling, randomized (up to 2x), no cap.
  if (c.langchain && !wrapped(c.langchain))
    add(
      "LangChain",
      "langchain",
      c.langchain.caller?.maxRetries ?? 6,
      { baseMs: 1_000, jitter: "up-to-2x" },
      "new ChatX({ maxRetries: 0 }) or breakwater/langchain",
    );
  if (c.openai && !wrapped(c.openai))
    add(
      "openai",
      "openai",
      c.openai.maxRetries ?? 2,
      STAINLESS,
      "new OpenAI({ maxRetries: 0 }) or breakwater/openai",
    );
  if (c.anthropic && !wrapped(c.anthropic))
    add(
      "anthropic",
      "anthropic",
      c.anthropic.maxRetries ?? 2,
      STAINLESS,
      "new Anthropic({ maxRetries: 0 }) or breakwater/anthropic",
    );
  if (c.google && !wrapped(c.google)) out.push(googleLayer(warnings, c.google));
  // ai: retryWithExponentialBackoff, 2 s then 4 s, no jitter.
  if (c.aiSdk)
    add(
      "the AI SDK",
      "ai-sdk",
      c.aiSdk.maxRetries ?? 2,
      { baseMs: 2_000, jitter: "none" },
      "over breakwaterMiddleware its retries send nothing (a give-up says isRetryable: false); over a model breakwater does not wrap, pass maxRetries: 0 to generateText/streamText",
    );
  const again = c.aiSdk?.streamRetries ?? 0;
  if (again > 0)
    add(
      "the AI SDK's streamText",
      "ai-sdk streamRetries",
      again,
      { baseMs: 0, jitter: "none" },
      "it calls the model again after an error part, replaying what was shown; under breakwaterMiddleware a give-up errors the stream and none is retried: leave streamRetries unset",
    );
  return out;
}

/**
 * Reports each retry layer around a call, the worst-case requests one logical call can send
 * (the product of the layers' attempts), the worst-case time spent waiting (the layers'
 * backoffs stacked), and any SDK whose own retries are still on. Outer layers first.
 */
export function audit(layers: LayerSpec[] = [], clients: AuditClients = {}): AuditReport {
  const v = validator("audit");
  if (!Array.isArray(layers))
    v.fail("layers", layers, "an array of { name, attempts, waitsMs? | backoff? }");
  layers.forEach((l, i) => {
    v.object(`layers[${i}]`, l);
    if (typeof l.name !== "string" || l.name === "")
      v.fail(`layers[${i}].name`, l.name, "a non-empty string");
    v.int(`layers[${i}].attempts`, l.attempts, 1);
  });
  const warnings: string[] = [];
  const all = [...layers, ...clientLayers(clients, warnings)];
  const out: AuditLayer[] = all.map((l) => ({
    name: l.name,
    attempts: l.attempts,
    worstWaitMs: worstWait(l),
  }));
  const worstCaseRequests = out.reduce((p, l) => p * l.attempts, 1);
  // Layer k's waits happen once per attempt of every layer outside it.
  let outer = 1;
  let worstCaseWaitMs = 0;
  for (const l of out) {
    if (l.worstWaitMs > 0) worstCaseWaitMs += outer * l.worstWaitMs; // Infinity × 0 is no wait
    outer *= l.attempts;
  }
  return { layers: out, worstCaseRequests, worstCaseWaitMs, warnings };
}
