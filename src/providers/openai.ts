/**
 * The OpenAI adapter: the official client, with breakwater as its only retry layer
 * (every method: chat, responses, embeddings, streams, helpers).
 *
 * @example
 * ```ts
 * import OpenAI from "openai";
 * import { withBreakwater } from "breakwater/openai";
 *
 * const client = withBreakwater(new OpenAI()); // its own retries off; the policy's defaults on
 * const r = await client.chat.completions.create({
 *   model: "gpt-4o-mini",
 *   messages: [{ role: "user", content: "Hello" }],
 * });
 * console.log(r.choices[0]?.message.content);
 * ```
 * @module breakwater/openai
 */
import type OpenAI from "openai";
import { opt } from "../internal.ts";
import { openaiDialect } from "./dialects/openai.ts";
import { type GuardedFetchOptions, guardedFetch } from "./fetch.ts";
import { scopedClient } from "./scope.ts";
import { adapterOptions, checkClient, FETCH_SPEC, marked } from "./shared.ts";

const OWNER = "openai.withBreakwater";
const SPEC = { ...FETCH_SPEC, includeUsage: opt.bool(true) };

export { type OwnAgentRetriesOptions, ownAgentRetries } from "./agents-retries.ts";
export {
  isChatContent,
  isResponsesContent,
  openaiDialect,
  openaiUsage,
  responsesInBand,
  responsesUsage,
} from "./dialects/openai.ts";
export { callOptions } from "./fetch.ts";

/** What `withBreakwater` takes for an openai client: the fetch layer's options (policy, run, connect timeout, attempt header, continuation, truncation, context window) and the usage chunk. */
export interface OpenAIAdapterOptions extends Omit<GuardedFetchOptions, "dialect" | "fetch"> {
  /** Ask for the usage chunk on streams (`stream_options.include_usage`). Default true. */
  includeUsage?: boolean;
}

/**
 * Routes every request of an `openai` client through one policy: the client returned is the
 * SDK's own (`withOptions({ maxRetries: 0, fetch })`), so every method, helper and type
 * works as documented (`parse`, `stream`, `withResponse`, `toReadableStream`, ...), and each
 * HTTP request it sends is retried by breakwater alone. A stream is retried until its first
 * content event, then passed through; chat streams ask for the usage chunk unless
 * `includeUsage: false`. Per call: `create(params, callOptions({ run }))`.
 */
export function withBreakwater<C extends OpenAI>(client: C, options: OpenAIAdapterOptions = {}): C {
  checkClient(
    client,
    OWNER,
    "an openai client (new OpenAI()), not another SDK's",
    (c) => typeof c.chat?.completions?.create === "function",
  );
  const { includeUsage } = adapterOptions(OWNER, SPEC, options);
  const { includeUsage: _, ...rest } = options;
  const fetch = guardedFetch({
    ...rest,
    fetch: (client as unknown as { fetch?: typeof globalThis.fetch }).fetch,
    dialect: openaiDialect(includeUsage),
  });
  const owned = client.withOptions({ maxRetries: 0, fetch, ...azure(client) }) as C;
  return marked(scopedClient(owned, OWNER), OWNER, fetch);
}

/** What an AzureOpenAI client's `withOptions` does not carry over (its constructor then
 * throws without OPENAI_API_VERSION set, and the deployment is lost): its own again. */
function azure(client: OpenAI): { apiVersion?: string; deployment?: string } {
  const c = client as unknown as { apiVersion?: unknown; deploymentName?: unknown };
  if (typeof c.apiVersion !== "string" || c.apiVersion === "") return {};
  return {
    apiVersion: c.apiVersion,
    ...(typeof c.deploymentName === "string" && { deployment: c.deploymentName }),
  };
}
