import { sayOnce } from "./scope.ts";

/**
 * A give-up of breakwaterMiddleware is final for every layer above it (rule 15). Two ways
 * a layer above would otherwise run the policy's attempts again:
 * - it reads an APICallError's `isRetryable` (the AI SDK's own `maxRetries`, Mastra's agent
 *   loop): the give-up leaves with `isRetryable: false`;
 * - it retries any error (Mastra's loop, on a timeout or a deadline, which are not
 *   APICallErrors): a prompt whose last turn is the very object a give-up had, asked again
 *   of the same model, is one logical call asked twice, and gets the same give-up at once,
 *   nothing sent. The AI SDK and Mastra build a prompt's turns per call and per step (a
 *   retry copies the list, not the turns), so a new call is never mistaken for a retry.
 */

/** The AI SDK's mark on an APICallError (`APICallError.isInstance` reads it). */
const API_CALL_ERROR = Symbol.for("vercel.ai.error.AI_APICallError");

/** The give-ups by the prompt's last turn, per model: a turn that is gone takes its entry
 * with it. */
const givenUp = new WeakMap<object, Map<string, unknown>>();

interface Asked {
  readonly prompt: unknown;
  readonly model: { readonly provider: string; readonly modelId: string };
}

const modelKey = (a: Asked) => `${a.model.provider}\u0000${a.model.modelId}`;

/** What a retry of the same call shares: the prompt's last turn (or the prompt). */
function anchor(prompt: unknown): object | undefined {
  const last: unknown = Array.isArray(prompt) ? prompt[prompt.length - 1] : undefined;
  if (typeof last === "object" && last !== null) return last;
  return typeof prompt === "object" && prompt !== null ? prompt : undefined;
}

/** The give-up this call already had, when a layer above asks it again. */
export function priorGiveUp(a: Asked): { error: unknown } | undefined {
  const at = anchor(a.prompt);
  const byModel = at && givenUp.get(at);
  if (!byModel?.has(modelKey(a))) return undefined;
  sayOnce(
    "breakwaterMiddleware",
    `a layer above the middleware (${framework(a.prompt)}) asked again for a call breakwater gave up on: it gets the same error, nothing is sent; set that layer's retries to 0`,
  );
  return { error: byModel.get(modelKey(a)) };
}

/** Who asks: Mastra stamps each prompt part with `providerOptions.mastra`. */
function framework(prompt: unknown): string {
  try {
    if (JSON.stringify(prompt).includes('"mastra":{')) return "Mastra's Agent maxRetries";
  } catch {} // a prompt that does not print is still asked again
  return "a retry loop";
}

/** Marks a give-up final (for `priorGiveUp` and for `isRetryable`) and returns it. */
export function finalGiveUp(a: Asked, error: unknown): unknown {
  const at = anchor(a.prompt);
  if (at) givenUp.set(at, (givenUp.get(at) ?? new Map<string, unknown>()).set(modelKey(a), error));
  const e = error as { [API_CALL_ERROR]?: unknown; isRetryable?: unknown } | null;
  try {
    if (typeof e === "object" && e !== null && e[API_CALL_ERROR] === true && e.isRetryable)
      Object.defineProperty(e, "isRetryable", { value: false, configurable: true });
  } catch {} // a frozen or hostile error keeps its word: the error itself still goes out
  return error;
}
