import type { Cost } from "../index.ts";

/** Characters per token, roughly, for a JSON request body: the estimate a rate limiter
 * reserves before the provider counts (it is corrected from usage after the call). */
const CHARS_PER_TOKEN = 4;

const OUTPUT_KEYS = ["max_tokens", "max_completion_tokens", "max_output_tokens"] as const;

/** The output allowance a request body asks for: OpenAI's `max_tokens` /
 * `max_completion_tokens`, the Responses API's `max_output_tokens`, Anthropic's
 * `max_tokens`, Gemini's `generationConfig.maxOutputTokens`. */
function outputAllowance(json: unknown): number {
  if (json === null || typeof json !== "object") return 0;
  const o = json as Record<string, unknown>;
  for (const k of OUTPUT_KEYS) if (typeof o[k] === "number" && o[k] > 0) return o[k];
  const g = (o.generationConfig ?? o.generation_config) as Record<string, unknown> | undefined;
  const n = g?.maxOutputTokens ?? g?.max_output_tokens;
  return typeof n === "number" && n > 0 ? n : 0;
}

/** What a request is expected to spend: its body's size in tokens and its output
 * allowance. Never throws; a body that is not JSON costs its size alone. */
export function estimateCost(body: string): Cost {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    json = undefined;
  }
  return {
    inputTokens: Math.ceil(body.length / CHARS_PER_TOKEN),
    outputTokens: outputAllowance(json),
  };
}
