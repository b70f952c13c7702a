import { type Ask, askedAgain, gaveUpOn } from "./given-up.ts";

/**
 * A give-up of breakwaterMiddleware is final for every layer above it (rule 15): a layer
 * that reads an APICallError's `isRetryable` (the AI SDK's own `maxRetries`, Mastra's agent
 * loop) finds it false; a layer that retries any error (Mastra's loop, on a timeout or a
 * deadline, which are not APICallErrors) asks again for the same call and gets the same
 * give-up, nothing sent (given-up.ts).
 */

/** The AI SDK's mark on an APICallError (`APICallError.isInstance` reads it). */
const API_CALL_ERROR = Symbol.for("vercel.ai.error.AI_APICallError");

interface Asked {
  readonly prompt: unknown;
  readonly model: { readonly provider: string; readonly modelId: string };
  /** The middleware's policy: its clock times the window. */
  readonly policy: { readonly options: { readonly clock: { now(): number } } };
}

const ask = (a: Asked): Ask => ({
  turns: a.prompt,
  model: `${a.model.provider}\u0000${a.model.modelId}`,
  owner: "breakwaterMiddleware",
  layer: () => framework(a.prompt),
  now: () => a.policy.options.clock.now(),
});

/** Who asks: Mastra stamps each prompt part with `providerOptions.mastra`. */
function framework(prompt: unknown): string {
  try {
    if (JSON.stringify(prompt).includes('"mastra":{')) return "Mastra's Agent maxRetries";
  } catch {} // a prompt that does not print is still asked again
  return "a retry loop";
}

/** The give-up this call already had, when a layer above asks it again. */
export const priorGiveUp = (a: Asked): { error: unknown } | undefined => askedAgain(ask(a));

/** Marks a give-up final (for `priorGiveUp` and for `isRetryable`) and returns it. */
export function finalGiveUp(a: Asked, error: unknown): unknown {
  gaveUpOn(ask(a), error);
  const e = error as { [API_CALL_ERROR]?: unknown; isRetryable?: unknown } | null;
  try {
    if (typeof e === "object" && e !== null && e[API_CALL_ERROR] === true && e.isRetryable)
      Object.defineProperty(e, "isRetryable", { value: false, configurable: true });
  } catch {} // a frozen or hostile error keeps its word: the error itself still goes out
  return error;
}
