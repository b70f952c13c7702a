import type { PartialAnswer, PartialResult } from "../core/errors.ts";
import { OUTPUT_SPEC, type OutputOptions } from "../core/output.ts";
import type { Usage } from "../core/usage.ts";
import { opt, parseOptions, type Rule, Validator } from "../core/validate.ts";
import { type AttemptContext, CALL_SPEC, type CallOptions } from "./call.ts";
import type { ResolvedOptions } from "./options.ts";

/** What a stream may retry once output flows: nothing (no-replay), unseen output (buffer), or after `onDiscard` (restart). */
export type StreamMode = "no-replay" | "buffer" | "restart";

/** What `onDiscard` is told in restart mode, before the retry. */
export interface DiscardInfo<C> {
  /** The attempt whose output the UI should drop. */
  readonly attempt: number;
  readonly chunks: readonly C[];
  readonly error: unknown;
}

/** Opt-in continuation: after a stream broke once output reached the consumer, how to
 * open a stream that goes on from what was shown (`partial`), or undefined to end it. */
export type ContinueFrom<C> = (
  partial: PartialResult<C>,
  error: unknown,
) => OpenStream<C> | undefined;

/** @internal How a source's chunks are told to the user (`partialOf(error).chunks`, the
 * outcome's count) when one chunk may hold several of what the user counts: the fetch
 * layer hands on a network read of whole events as one chunk, and tells its events. */
export const SHOWN = Symbol("breakwater.shown");

/** What `policy.stream` takes for one stream. */
export interface StreamOptions<C> extends CallOptions, OutputOptions<readonly C[]> {
  /** Turns an in-band error chunk (an error event inside an HTTP 200) into an error to
   * classify; return undefined for a normal chunk. */
  inspect?: (chunk: C) => unknown;
  /** Reads usage from a chunk; each field keeps its latest reported value. */
  usage?: (chunk: C) => Partial<Usage> | undefined;
  /** Which chunks are content. Chunks before the first content chunk (a role header, a
   * message_start, a ping) are held back, so a failure before any content is retried
   * even though bytes arrived. @default every chunk is content */
  isContent?: (chunk: C) => boolean;
  /** "no-replay": never retry once a chunk reached the consumer. "buffer": hold the whole
   * answer and emit it after success, so mid-stream failures can be retried. "restart":
   * retry a mid-stream failure after calling `onDiscard`. @default "no-replay" */
  mode?: StreamMode;
  /** Required with mode "restart": tells the UI to drop the partial answer. */
  onDiscard?: (info: DiscardInfo<C>) => unknown;
  /** Time from the attempt's start to the first content chunk. @default the policy's */
  firstTokenTimeoutMs?: number;
  /** The longest gap between content chunks once content flows (pings, comments and
   * usage-only chunks do not reset it). @default the policy's */
  idleTimeoutMs?: number;
  /** A cap on one attempt's whole duration. @default the policy's */
  totalTimeoutMs?: number;
  /** Reads the answer so far from the chunks delivered, for a stream that breaks
   * (`partialOf(error).answer`); read only when asked for. */
  answer?: (chunks: readonly C[]) => PartialAnswer;
  /** Opt-in continuation (mode "no-replay" only): when the stream breaks after output
   * reached the consumer, return how to open a stream that goes on from it (the model
   * asked to continue its own text) and the consumer reads one answer. It is a retry of
   * the same call in every other respect: the failure must be retryable, and the
   * attempts, the deadline, the gates and `onRetry` must allow it, after the backoff. Its
   * chunks follow the ones shown; return undefined to end the stream as usual. */
  continueFrom?: ContinueFrom<C>;
  /** @internal */
  [SHOWN]?: (chunks: readonly C[]) => readonly unknown[];
}

/** Opens one attempt's stream: handed the attempt's context, returns the provider's chunks. */
export type OpenStream<C> = (
  context: AttemptContext,
) => AsyncIterable<C> | PromiseLike<AsyncIterable<C>>;

/** A stream's options, validated, with the policy's timeouts where it sets none. */
export interface ResolvedStream<C> {
  readonly inspect: ((chunk: C) => unknown) | undefined;
  readonly usage: ((chunk: C) => Partial<Usage> | undefined) | undefined;
  readonly isContent: ((chunk: C) => boolean) | undefined;
  readonly mode: StreamMode;
  readonly onDiscard: ((info: DiscardInfo<C>) => unknown) | undefined;
  readonly firstTokenMs: number;
  readonly idleMs: number;
  readonly totalMs: number;
  readonly answer: ((chunks: readonly C[]) => PartialAnswer) | undefined;
  readonly continueFrom: ContinueFrom<C> | undefined;
  /** How the chunks delivered are told to the user (SHOWN); undefined: as they are. */
  readonly shown: ((chunks: readonly C[]) => readonly unknown[]) | undefined;
  /** The checks on the whole answer (`validate`, `truncated`), when there are any. */
  readonly output: OutputOptions<readonly C[]> | undefined;
}

const MODES = ["no-replay", "buffer", "restart"] as const;
const own = opt.ms({ default: Number.NaN }); // NaN: the policy's value

const SPEC = {
  ...CALL_SPEC,
  inspect: opt.fn<(chunk: unknown) => unknown>(),
  usage: opt.fn<(chunk: unknown) => Partial<Usage> | undefined>(),
  isContent: opt.fn<(chunk: unknown) => boolean>(),
  mode: opt.oneOf(MODES, "no-replay"),
  onDiscard: opt.fn<(info: DiscardInfo<unknown>) => unknown>(),
  firstTokenTimeoutMs: own,
  idleTimeoutMs: own,
  totalTimeoutMs: own,
  answer: opt.fn<(chunks: readonly unknown[]) => PartialAnswer>(),
  continueFrom: opt.fn<ContinueFrom<unknown>>(),
  ...OUTPUT_SPEC,
} satisfies Record<Exclude<keyof StreamOptions<unknown>, typeof SHOWN>, Rule<unknown>>;

const or = (mine: number, policy: number) => (Number.isNaN(mine) ? policy : mine);

/** Validates what a caller hands `policy.stream`; a bad value throws naming it. */
export function resolveStream<C>(
  o: ResolvedOptions,
  open: unknown,
  options: StreamOptions<C>,
): ResolvedStream<C> {
  const v = new Validator("policy.stream");
  v.fn("open", open);
  const s = parseOptions(v, SPEC, options);
  if (s.mode === "restart" && s.onDiscard === undefined)
    v.fail(
      "onDiscard",
      undefined,
      'a function when mode is "restart" (the UI must drop the partial answer first)',
    );
  if (s.continueFrom !== undefined && s.mode !== "no-replay")
    v.fail(
      "continueFrom",
      s.continueFrom,
      'absent unless mode is "no-replay" (a continuation goes on from what was shown)',
    );
  return {
    inspect: s.inspect,
    usage: s.usage,
    isContent: s.isContent,
    mode: s.mode,
    onDiscard: s.onDiscard,
    answer: s.answer as ((chunks: readonly C[]) => PartialAnswer) | undefined,
    continueFrom: s.continueFrom as ContinueFrom<C> | undefined,
    shown: typeof options?.[SHOWN] === "function" ? options[SHOWN] : undefined,
    output:
      s.validate === undefined && s.truncated === undefined
        ? undefined
        : (s as unknown as OutputOptions<readonly C[]>),
    firstTokenMs: or(s.firstTokenTimeoutMs, o.firstTokenTimeoutMs),
    idleMs: or(s.idleTimeoutMs, o.idleTimeoutMs),
    totalMs: or(s.totalTimeoutMs, o.totalTimeoutMs),
  } as ResolvedStream<C>;
}
