import type { Clock } from "../../index.ts";
import { readHeader } from "../../internal.ts";

/**
 * The peers' own retry loops, read from their sources and cited line by line (one file a
 * peer, beside this one), so each peer stack retries what that peer retries and waits what
 * it waits, not what breakwater would. A peer layer is its loop: attempt, ask its
 * predicate, sleep its delay, again.
 */
export interface PeerLayer {
  readonly name: string;
  /** Attempts, the first included. */
  readonly maxAttempts: number;
  /** Per attempt, in ms (Infinity: none). */
  readonly timeoutMs: number;
  /** The wait before retry `n` (0 for the first retry) after `error`, in ms; undefined
   * when the peer does not retry it. `random` is [0, 1). */
  next(error: unknown, n: number, random: () => number, now: number): number | undefined;
  /** Whether the caller's abort reaches the loop: stops its waits and aborts its attempt. */
  readonly cancels: boolean;
}

/** What a peer's own loop is given by its stack: time, randomness and the app's
 * per-attempt timeout. */
export interface PeerCallContext {
  readonly clock: Clock;
  readonly random: () => number;
  readonly timeoutMs?: number | undefined;
}

/** One request under the app's per-attempt timeout (if it has one), never retried: the
 * attempt of a peer whose loop is its own (ai-retry's, ai-fallback's). */
export const oneRequest = (name: string, timeoutMs: number | undefined): PeerLayer => ({
  name,
  maxAttempts: 1,
  timeoutMs: timeoutMs ?? Number.POSITIVE_INFINITY,
  cancels: true,
  next: () => undefined,
});

/** A simulated attempt cut by the layer's own timeout (no stack: the storm makes many). */
export class PeerTimeoutError extends Error {
  override name = "TimeoutError";
  constructor(message: string) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}

/** What the peers read of an error, as their SDKs shape it (the storm's `SimHttpError`). */
export const statusOf = (e: unknown): number | undefined => {
  const s = (e as { status?: unknown } | null)?.status;
  return typeof s === "number" ? s : undefined;
};
export const headersOf = (e: unknown) => (e as { headers?: unknown } | null)?.headers;
export const header = (e: unknown, name: string) => readHeader(headersOf(e), name);
export const codeOf = (e: unknown): string | undefined => {
  const c = (e as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof c === "string" ? c : undefined;
};
export const messageOf = (e: unknown) => String((e as { message?: unknown } | null)?.message ?? "");
export const isTimeout = (e: unknown) => e instanceof PeerTimeoutError;
export const isAbort = (e: unknown) => (e as { name?: unknown } | null)?.name === "AbortError";
/** 408, 409, 429 and 5xx: what the SDKs' loops call retryable. */
export const sdkRetryable = (status: number) =>
  status === 408 || status === 409 || status === 429 || status >= 500;

/** `retry-after-ms` then `retry-after` (seconds, else an HTTP-date), as openai-node and
 * the AI SDK read them: parseFloat, no cap; NaN when absent. */
export function hintMs(e: unknown, now: number): number {
  const h = headersOf(e);
  const ms = Number.parseFloat(readHeader(h, "retry-after-ms") ?? "");
  if (!Number.isNaN(ms)) return ms;
  const ra = readHeader(h, "retry-after");
  if (ra === undefined) return Number.NaN;
  const s = Number.parseFloat(ra);
  return Number.isNaN(s) ? Date.parse(ra) - now : s * 1000;
}

/** One attempt under `layer`'s timeout: the provider never learns the client left. */
function attemptOnce<T>(
  clock: Clock,
  layer: PeerLayer,
  signal: AbortSignal | undefined,
  attempt: (signal: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  if (layer.timeoutMs === Number.POSITIVE_INFINITY) return attempt(signal);
  return new Promise<T>((resolve, reject) => {
    const cancel = clock.schedule(layer.timeoutMs, () =>
      reject(new PeerTimeoutError(`${layer.name}: timed out after ${layer.timeoutMs} ms`)),
    );
    attempt(signal).then(
      (v) => {
        cancel();
        resolve(v);
      },
      (e) => {
        cancel();
        reject(e);
      },
    );
  });
}

/**
 * Runs `leaf` inside the layers, outermost first: each layer retries what the layer inside
 * it gave up on, by its own rules. `timeoutMs` (the app's per-attempt timeout, when the
 * scenario sets one) replaces the innermost layer's.
 */
export async function runLayers<T>(
  layers: readonly PeerLayer[],
  ctx: { clock: Clock; random: () => number; timeoutMs?: number | undefined },
  signal: AbortSignal | undefined,
  leaf: (signal: AbortSignal | undefined) => Promise<T>,
  depth = 0,
): Promise<T> {
  const base = layers[depth]!;
  const last = depth === layers.length - 1;
  const layer = last && ctx.timeoutMs !== undefined ? { ...base, timeoutMs: ctx.timeoutMs } : base;
  const inner = (s: AbortSignal | undefined) =>
    last ? leaf(s) : runLayers(layers, ctx, s, leaf, depth + 1);
  const mine = layer.cancels ? signal : undefined;
  for (let n = 0; ; n++) {
    try {
      return await attemptOnce(ctx.clock, layer, mine, inner);
    } catch (error) {
      if (mine?.aborted || n + 1 >= layer.maxAttempts) throw error;
      const wait = layer.next(error, n, ctx.random, ctx.clock.now());
      if (wait === undefined) throw error;
      await ctx.clock.sleep(Math.max(0, wait), mine);
    }
  }
}
