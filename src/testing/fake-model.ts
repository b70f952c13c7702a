import type { Clock, Usage } from "../index.ts";

/** One scripted answer of a fake model: an HTTP-shaped failure, or text. */
export type FakeStep =
  | { fail: number; code?: string; retryAfterS?: number; latencyMs?: number }
  | { text: string; latencyMs?: number };

/** What a `FakeModel` answers: its text and usage. */
export interface FakeResult {
  text: string;
  usage: Usage;
}

/** Tokens, counted the same simple way everywhere (fault server, fakes): one per word. */
export function countTokens(text: string): number {
  let n = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const space = text.charCodeAt(i) <= 32;
    if (!space && !inWord) n++;
    inWord = !space;
  }
  return n;
}

/**
 * A model that follows a script, one step per call (the last step repeats), on a given
 * clock: what tests and the demo drive a policy with.
 */
export class FakeModel {
  readonly calls: number[] = [];
  readonly #clock: Clock;
  readonly #steps: readonly FakeStep[];
  readonly #prompt: string;

  constructor(
    clock: Clock,
    steps: readonly FakeStep[],
    prompt = "Summarise the ticket for the customer.",
  ) {
    if (steps.length === 0) throw new TypeError("FakeModel: steps must not be empty");
    this.#clock = clock;
    this.#steps = steps;
    this.#prompt = prompt;
  }

  /** One call: the next step of the script (an answer, an error, a hang until aborted). */
  async generate(signal?: AbortSignal): Promise<FakeResult> {
    const step = this.#steps[Math.min(this.calls.length, this.#steps.length - 1)]!;
    this.calls.push(this.#clock.now());
    if (step.latencyMs) await this.#clock.sleep(step.latencyMs, signal);
    if ("fail" in step) {
      const headers: Record<string, string> = {};
      if (step.retryAfterS !== undefined) headers["retry-after"] = String(step.retryAfterS);
      throw Object.assign(new Error(`fake model: HTTP ${step.fail}`), {
        status: step.fail,
        code: step.code,
        headers,
      });
    }
    return {
      text: step.text,
      usage: { inputTokens: countTokens(this.#prompt), outputTokens: countTokens(step.text) },
    };
  }
}
