import type { Clock } from "../../index.ts";
import { AI_SDK } from "./ai-sdk.ts";
import {
  isAbort,
  isTimeout,
  messageOf,
  oneRequest,
  type PeerCallContext,
  runLayers,
  statusOf,
} from "./layers.ts";

/*
 * ai-fallback 3.0.0 (src/index.ts of the published package; the most installed fallback
 * add-on of the AI SDK), `createFallback({ models: [primary, second] })` as its README sets it,
 * under `generateText` with its default maxRetries 2 (the AI SDK's loop, ./ai-sdk.ts, wraps
 * the fallback model: a call is up to 3 passes over the models).
 */

/** `retryableStatusCodes` (src/index.ts:28-37): these, and any status above 500, switch. */
const STATUSES = [401, 403, 408, 409, 413, 429, 498, 500];

/** `retryableErrors` (src/index.ts:39-61): a message holding one of these switches too. */
const WORDS = [
  "overloaded",
  "service unavailable",
  "bad gateway",
  "too many requests",
  "toomanyrequests",
  "internal server error",
  "gateway timeout",
  "rate_limit",
  "ratelimit",
  "rate limit",
  "wrong-key",
  "unexpected",
  "capacity",
  "timeout",
  "server_error",
  "429",
  "500",
  "502",
  "503",
  "504",
];

/** `defaultShouldRetryThisError` (src/index.ts:63-81): the status first, then the words of
 * the message. An app's timeout reaches it as the fetch's abort, "The operation was aborted
 * due to timeout" (undici), whose words name a timeout: it switches. */
export function aiFallbackSwitches(error: unknown): boolean {
  const status = statusOf(error);
  if (status !== undefined && (STATUSES.includes(status) || status > 500)) return true;
  if (isTimeout(error)) return true;
  const message = messageOf(error).toLowerCase();
  return message !== "" && WORDS.some((w) => message.includes(w));
}

/** One `FallbackModel` (src/index.ts:111-218), shared by every call of the app as it shares
 * the model object: the index of the model calls go to, reset to the first at most once a
 * `modelResetInterval` (3 minutes) after the last reset (`checkAndResetModel`, :156-165: a
 * switch long after the last reset is undone by the next call). */
export class AiFallbackModel {
  #current = 0;
  #lastReset: number;
  readonly #clock: Clock;
  readonly #models: number;

  constructor(clock: Clock, models: number) {
    this.#clock = clock;
    this.#models = models;
    this.#lastReset = clock.now();
  }

  /** `doGenerate` (:207-212): reset if due, then `retry` (:170-198): the current model; a
   * failure that switches moves the shared index to the next model, and the call goes on
   * there until it is back where it began (then the last error is thrown); any other
   * failure is thrown at once. */
  async generate<T>(
    send: readonly ((s: AbortSignal | undefined) => Promise<T>)[],
    signal: AbortSignal | undefined,
  ): Promise<T> {
    const now = this.#clock.now();
    if (now - this.#lastReset >= 180_000 && this.#current !== 0) {
      this.#current = 0;
      this.#lastReset = now;
    }
    const initial = this.#current;
    for (;;) {
      try {
        return await send[this.#current]!(signal);
      } catch (error) {
        if (isAbort(error) || !aiFallbackSwitches(error)) throw error;
        this.#current = (this.#current + 1) % this.#models;
        if (this.#current === initial) throw error;
      }
    }
  }
}

/** What the stack gives a call: time, randomness and the app's per-attempt timeout. */
export type AiFallbackContext = PeerCallContext;

/** One `generateText` call over the shared fallback model: the AI SDK's 3 attempts, each a
 * pass of `generate` over the models (a request under the app's timeout, if it has one). */
export function aiFallbackCall<T>(
  model: AiFallbackModel,
  ctx: AiFallbackContext,
  signal: AbortSignal | undefined,
  send: readonly ((s: AbortSignal | undefined) => Promise<T>)[],
): Promise<T> {
  const request = oneRequest("ai-fallback request", ctx.timeoutMs);
  const timed = send.map(
    (f) => (s: AbortSignal | undefined) => runLayers([request], ctx, s, (s2) => f(s2)),
  );
  // The app's timeout is each request's, not the AI SDK's whole call's.
  const loop = { clock: ctx.clock, random: ctx.random };
  return runLayers([AI_SDK], loop, signal, (s) => model.generate(timed, s));
}
