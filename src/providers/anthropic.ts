import type Anthropic from "@anthropic-ai/sdk";
import type { Usage } from "../index.ts";
import { type AdapterOptions, asPolicy, overlay, runFor } from "./shared.ts";

export type AnthropicAdapterOptions = AdapterOptions;

type Obj = Record<string, any>;

/** Usage from a message, or from the `message_start` (input) and `message_delta`
 * (cumulative output) events of a stream. */
export function anthropicUsage(x: unknown): Partial<Usage> | undefined {
  const o = x as Obj | null;
  const u = (o?.type === "message_start" ? o.message?.usage : o?.usage) as Obj | undefined;
  if (!u) return undefined;
  return {
    ...(typeof u.input_tokens === "number" && { inputTokens: u.input_tokens }),
    ...(typeof u.output_tokens === "number" && { outputTokens: u.output_tokens }),
  };
}

/** Content: a delta of a content block (text, a tool call's JSON, thinking). */
export const isAnthropicContent = (event: unknown): boolean =>
  (event as Obj | null)?.type === "content_block_delta";

/**
 * Routes an `@anthropic-ai/sdk` client's `messages.create` (streaming or not) through one
 * policy, the client's own retries off. `overloaded_error` (529) and `rate_limit_error` are
 * retried, `billing_error` and a prompt that is too long are not; an `error` event inside a
 * 200 stream (the SDK raises it) before any content is retried.
 */
export function withBreakwater<C extends Anthropic>(
  client: C,
  options: AnthropicAdapterOptions = {},
): C {
  const p = asPolicy(options.policy);
  const raw = client.withOptions({ maxRetries: 0 }) as C;
  const create = raw.messages.create.bind(raw.messages) as (params: Obj, options?: Obj) => any;
  const routed = (params: Obj, request: Obj = {}) => {
    const { run, ...req } = request;
    const signal = req.signal as AbortSignal | undefined;
    if (params.stream) {
      return p.stream((ctx) => create(params, { ...req, signal: ctx.signal }), {
        ...(signal && { signal }),
        ...runFor(options, run),
        usage: anthropicUsage,
        isContent: isAnthropicContent,
      });
    }
    return p.execute((ctx) => create(params, { ...req, signal: ctx.signal }), {
      ...(signal && { signal }),
      ...runFor(options, run),
      usage: anthropicUsage,
    });
  };
  const messages = overlay(raw.messages, { create: routed });
  return overlay(raw, { messages });
}
