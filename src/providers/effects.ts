import type { Effect } from "../index.ts";
import { pathOf } from "./dialect.ts";

/**
 * Which requests change state on the server each time they arrive, by provider
 * (docs/architecture.md, rule 20): what `unsafe` means for each API. Everything else a
 * model API serves is stateless or creates an object nobody refers to yet: sent again, it
 * costs again but changes nothing that exists.
 */
type Rule = readonly [method: string, path: RegExp, why: string];

const OPENAI: readonly Rule[] = [
  ["POST", /\/conversations\/[^/]+\/items$/, "appends items to a stored conversation"],
  ["POST", /\/conversations$/, "creates a conversation with its first items"],
  ["POST", /\/threads(?:\/[^/]+)?\/(?:messages|runs)$/, "appends to an Assistants thread"],
  ["POST", /\/threads\/runs$/, "creates an Assistants thread and starts a run"],
  ["POST", /\/runs\/[^/]+\/submit_tool_outputs$/, "moves an Assistants run on"],
  ["POST", /\/batches$/, "starts a batch job (billed)"],
  ["POST", /\/fine_tuning\/jobs$/, "starts a fine-tuning job (billed)"],
  ["POST", /\/(?:files|uploads)$/, "creates a file"],
  ["POST", /\/vector_stores\/[^/]+\/(?:files|file_batches)$/, "adds files to a vector store"],
];

const ANTHROPIC: readonly Rule[] = [
  ["POST", /\/messages\/batches$/, "starts a message batch (billed)"],
  ["POST", /\/files$/, "creates a file"],
];

const GOOGLE: readonly Rule[] = [
  ["POST", /:(?:batchGenerateContent|asyncBatchEmbedContent)$/, "starts a batch job (billed)"],
  ["POST", /\/cachedContents$/, "creates a context cache (billed while it lives)"],
  ["POST", /\/files$/, "creates a file"],
];

/** The rule's reading of the last request of each table: an SDK sends the same method and
 * URL call after call, and the rules need not be run again for it. */
const lastOf = new WeakMap<
  readonly Rule[],
  { method: string; path: string; effect: Effect | undefined }
>();

const ruled = (rules: readonly Rule[], method: string, url: string): Effect | undefined => {
  const path = pathOf(url);
  const last = lastOf.get(rules);
  if (last?.method === method && last.path === path) return last.effect;
  let effect: Effect | undefined;
  for (const [m, re] of rules)
    if (m === method && re.test(path)) {
      effect = "unsafe";
      break;
    }
  lastOf.set(rules, { method, path, effect });
  return effect;
};

const isObj = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === "object";

/**
 * OpenAI: a Responses request that names a stored `conversation` appends its turn to it,
 * and one with `background: true` starts a job; both are unsafe. One that continues from
 * `previous_response_id` is not: the previous response is never changed, a resend makes a
 * second response beside it (billed again, stored when `store` is on, referred to by
 * nobody).
 */
export function openaiEffect(method: string, url: string, body: unknown): Effect {
  if (method === "GET" || method === "HEAD") return "read";
  if (pathOf(url).endsWith("/responses") && isObj(body))
    if ((body.conversation !== undefined && body.conversation !== null) || body.background === true)
      return "unsafe";
  return ruled(OPENAI, method, url) ?? "idempotent";
}

export function anthropicEffect(method: string, url: string): Effect {
  if (method === "GET" || method === "HEAD") return "read";
  return ruled(ANTHROPIC, method, url) ?? "idempotent";
}

export function googleEffect(method: string, url: string): Effect {
  if (method === "GET" || method === "HEAD") return "read";
  return ruled(GOOGLE, method, url) ?? "idempotent";
}

/** What the rules say about a request, for the table in docs/calls.md and the tests. */
export const STATEFUL = { openai: OPENAI, anthropic: ANTHROPIC, google: GOOGLE } as const;
