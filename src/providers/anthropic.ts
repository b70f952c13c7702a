/**
 * The Anthropic adapter: the official client, with breakwater as its only retry layer.
 *
 * @example
 * ```ts
 * import Anthropic from "@anthropic-ai/sdk";
 * import { withBreakwater } from "breakwater/anthropic";
 *
 * const client = withBreakwater(new Anthropic());
 * const m = await client.messages.create({
 *   model: "claude-sonnet-4-6",
 *   max_tokens: 256,
 *   messages: [{ role: "user", content: "Hello" }],
 * });
 * console.log(m.content[0]?.type === "text" ? m.content[0].text : "");
 * ```
 * @module breakwater/anthropic
 */
import type Anthropic from "@anthropic-ai/sdk";
import { anthropicDialect } from "./dialects/anthropic.ts";
import { type GuardedFetchOptions, guardedFetch } from "./fetch.ts";
import { scopedClient } from "./scope.ts";
import { adapterOptions, checkClient, FETCH_SPEC, marked } from "./shared.ts";

const OWNER = "anthropic.withBreakwater";

export {
  anthropicDialect,
  anthropicUsage,
  isAnthropicContent,
} from "./dialects/anthropic.ts";
export { callOptions } from "./fetch.ts";

/** What `withBreakwater` takes for an Anthropic client: the fetch layer's options (policy, run, connect timeout, attempt header, continuation, truncation, context window). */
export type AnthropicAdapterOptions = Omit<GuardedFetchOptions, "dialect" | "fetch">;

/**
 * Routes every request of an `@anthropic-ai/sdk` client through one policy: the client
 * returned is the SDK's own (`withOptions({ maxRetries: 0, fetch })`), so `messages.create`,
 * `messages.stream()` with its events and `finalMessage()`, `countTokens`, batches and
 * `withResponse()` all work as documented, each request retried by breakwater alone.
 * `overloaded_error` (529) and `rate_limit_error` are retried, a spent credit balance and a
 * prompt that is too long are not; an `error` event before any content is retried.
 */
export function withBreakwater<C extends Anthropic>(
  client: C,
  options: AnthropicAdapterOptions = {},
): C {
  checkClient(
    client,
    OWNER,
    "an Anthropic client (new Anthropic()), not another SDK's",
    (c) => typeof c.messages?.create === "function" && c.chat === undefined,
  );
  const fetch = guardedFetch({
    ...(adapterOptions(OWNER, FETCH_SPEC, options) && options),
    fetch: (client as unknown as { fetch?: typeof globalThis.fetch }).fetch,
    dialect: anthropicDialect,
  });
  return marked(
    scopedClient(client.withOptions({ maxRetries: 0, fetch }) as C, OWNER),
    OWNER,
    fetch,
  );
}
