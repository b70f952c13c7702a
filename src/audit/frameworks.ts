/**
 * The retry layers agent frameworks keep, read off the live objects users hold: an OpenAI
 * Agents SDK runner or agent, a langchain `createAgent` agent. Duck-typed: no framework is
 * imported.
 */
import type { LayerSpec } from "./audit.ts";

type Obj = Record<string, any>;
const isObj = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** Found layers and what to change about each. */
export interface Found {
  readonly layer: LayerSpec;
  readonly warning: string;
}

/** An Agents SDK `modelSettings` whose `retry` retries a model call on its own. */
export interface AgentRetry {
  /** Where it is: "runner.config.modelSettings.retry", "agent.handoffs[0].modelSettings.retry". */
  readonly at: string;
  /** The settings object holding `retry` (the SDK merges it per request). */
  readonly settings: Obj;
  readonly maxRetries: number;
  readonly policy: (context: { error: unknown }) => unknown;
}

/** A policy `ownAgentRetries` made: it retries nothing breakwater gave up on. */
export const OWNED_POLICY = Symbol.for("breakwater.owned");

/** Each `modelSettings.retry` of a runner (its `config`), an agent and the agents it hands
 * off to that still retries: a policy breakwater did not make, and `maxRetries` > 0 (the
 * Agents SDK retries only with both). The one walk `audit` and `ownAgentRetries` share. */
export function agentRetries(target: unknown): AgentRetry[] {
  const out: AgentRetry[] = [];
  const look = (settings: unknown, at: string) => {
    const retry = isObj(settings) ? settings.retry : undefined;
    const n = isObj(retry) ? retry.maxRetries : undefined;
    if (typeof retry?.policy !== "function" || retry.policy[OWNED_POLICY] || !(n > 0)) return;
    out.push({ at, settings: settings as Obj, maxRetries: n, policy: retry.policy });
  };
  if (isObj(target) && isObj(target.config))
    look(target.config.modelSettings, "runner.config.modelSettings.retry");
  const seen = new Set<unknown>();
  const walk = (agent: unknown, at: string) => {
    if (!isObj(agent) || seen.has(agent) || !("modelSettings" in agent)) return;
    seen.add(agent);
    look(agent.modelSettings, `${at}.modelSettings.retry`);
    const handoffs: unknown[] = Array.isArray(agent.handoffs) ? agent.handoffs : [];
    for (const [i, h] of handoffs.entries()) // a handoff() holds its agent; or an Agent
      walk(isObj(h) && isObj(h.agent) ? h.agent : h, `${at}.handoffs[${i}]`);
  };
  walk(target, "agent");
  return out;
}

/** The Agents SDK's retry layers that still retry, as `audit` counts them. */
export function agentsLayers(target: unknown): Found[] {
  return agentRetries(target).map(({ at, maxRetries: n }) => ({
    layer: { name: `agents-sdk ${at}`, attempts: n + 1 },
    warning: `${at} retries a model call ${n} times over breakwater's: ownAgentRetries() from breakwater/openai`,
  }));
}

/** A createAgent agent's retry and fallback middleware, and LangGraph's retry policy on its
 * model node. The middleware's options live in its closure: its defaults are counted. */
export function langchainAgentLayers(agent: unknown): Found[] {
  const out: Found[] = [];
  const a = isObj(agent) ? agent : {};
  const middleware: unknown[] = Array.isArray(a.options?.middleware) ? a.options.middleware : [];
  const names = middleware.map((m) => (isObj(m) ? String(m.name) : ""));
  if (names.includes("modelRetryMiddleware"))
    out.push({
      layer: { name: "langchain modelRetryMiddleware", attempts: 3 },
      warning:
        "modelRetryMiddleware retries each model call (2 retries by default) and answers a give-up with an AIMessage the agent goes on with: agentMiddleware() from breakwater/langchain",
    });
  if (names.includes("modelFallbackMiddleware"))
    out.push({
      layer: { name: "langchain modelFallbackMiddleware", attempts: 1 },
      warning:
        "modelFallbackMiddleware calls each fallback model with its own retries, on any error: agentMiddleware({ fallbacks }) from breakwater/langchain",
    });
  const graph = a.graph;
  const policies = [graph?.nodes?.model_request?.retryPolicy, graph?.retryPolicy].filter(isObj);
  for (const p of policies.slice(0, 1)) {
    const attempts = typeof p.maxAttempts === "number" ? p.maxAttempts : 3;
    if (attempts > 1)
      out.push({
        layer: { name: "langgraph retryPolicy", attempts },
        warning: `LangGraph's retryPolicy runs the model node ${attempts} times: drop it where breakwater owns the retries`,
      });
  }
  return out;
}

/** A Mastra `Agent`'s own retries: `maxRetries` (0 by default), or the largest of its model
 * list's entries. Its loop is p-retry's: 1 s, doubling, no jitter. */
export function mastraLayers(agent: unknown): Found[] {
  const a = isObj(agent) ? agent : {};
  const list: unknown[] = Array.isArray(a.model) ? a.model : [];
  const counts = [
    a.maxRetries,
    ...list.map((m) => (isObj(m) && m.enabled !== false ? m.maxRetries : 0)),
  ];
  const n = Math.max(0, ...counts.filter((x): x is number => Number.isInteger(x)));
  if (n === 0) return [];
  return [
    {
      layer: {
        name: "mastra Agent maxRetries",
        attempts: n + 1,
        backoff: { baseMs: 1_000, jitter: "none" },
      },
      warning: `Mastra's Agent retries a failed model call ${n} times (maxRetries ${n}): over breakwaterMiddleware a retry gets breakwater's give-up back with nothing sent, but only after Mastra's backoff (1 s, 2 s, ...); over a model breakwater does not wrap it multiplies: new Agent({ maxRetries: 0 }), its default`,
    },
  ];
}
