import type { LanguageModelV4Middleware, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import type { Context } from "@restatedev/restate-sdk";
import type { CallOptions, Fallback, Policy } from "../index.ts";
import { type AiSdkMiddlewareOptions, breakwaterMiddleware } from "../providers/ai-sdk.ts";
import { decode, encode, type RecordedStream, replayed } from "../providers/ai-sdk-journal.ts";
import { resolveStep } from "./step.ts";

type Part = LanguageModelV4StreamPart;
type Wrap = NonNullable<LanguageModelV4Middleware["wrapStream"]>;
type StreamResult = Awaited<ReturnType<Wrap>>;

/** What `durableCalls` takes: the AI SDK middleware's options (a built `policy`), and how
 * long a wait may be held in the process. */
export interface DurableCallsOptions extends Omit<AiSdkMiddlewareOptions, "policy" | "run"> {
  /** The policy that owns retry, built once and shared (`policy({ ... })`). @default one
   * `policy()` shared by every step of the process that names none */
  policy?: Policy;
  /** The longest wait slept in the process; a longer one is a `ctx.sleep`. @default 5000 */
  holdMs?: number;
}

/** The policy as one leg of a step sees it: each call it makes carries the leg's
 * attempts, deadline and hold (`durableStep`'s). */
function legView(p: Policy, leg: CallOptions): Policy {
  return {
    options: p.options,
    execute: (op, o) => p.execute(op, { ...o, ...leg }),
    stream: (open, o) => p.stream(open, { ...o, ...leg }),
  };
}

/** One middleware call as a one-upstream chain: `durableStep` runs it leg by leg, handing
 * each leg's options to the breakwater middleware it makes for that leg. */
function oneCall<T>(p: Policy, send: (view: Policy) => Promise<T>): Fallback<T> {
  const stream = () => {
    throw new TypeError("durableCalls: a call is run, not streamed, by its step");
  };
  return {
    limits: p.options,
    execute: ({ signal: _s, run: _r, ...leg } = {}) => send(legView(p, leg)),
    stream,
  };
}

/** A live stream the step's leg fills as parts arrive, or that fails with the step. */
function channel() {
  let controller!: ReadableStreamDefaultController<Part>;
  const stream = new ReadableStream<Part>({
    start: (c) => {
      controller = c;
    },
  });
  return {
    stream,
    push: (p: Part) => controller.enqueue(p),
    close: () => controller.close(),
    fail: (e: unknown) => controller.error(e),
  };
}

/**
 * The AI SDK middleware for a Restate handler, in place of `@restatedev/vercel-ai-middleware`'s
 * `durableCalls` (docs/architecture.md, rule 22): each `doGenerate` and `doStream` is a
 * breakwater step of the handler (`run`): classified, retried within breakwater's
 * attempts, a long wait a `ctx.sleep`, a final failure a `TerminalError` (its
 * `isRetryable: false` for the AI SDK), the answer journaled (a stream's parts as they
 * came, replayed as such). A stream's parts reach the consumer as they arrive; after the
 * first, a break ends the stream and the step, never replayed.
 */
export function durableCallsMiddleware(
  ctx: Context,
  options: DurableCallsOptions,
  run: <T>(ctx: Context, name: string, target: Fallback<T>) => Promise<T>,
): LanguageModelV4Middleware {
  const { holdMs, policy, ...mw } = options;
  const r = resolveStep("durableCalls", () => undefined, {
    ...(policy !== undefined && { policy }),
    ...(holdMs !== undefined && { holdMs }),
  });
  const inner = (view: Policy) => breakwaterMiddleware({ ...mw, policy: view });
  return {
    specificationVersion: "v4",
    wrapGenerate: async (args) => {
      const name = `generate ${args.model.modelId}`;
      const call = oneCall(r.policy, async (view) => encode(await inner(view).wrapGenerate!(args)));
      return decode(await run(ctx, name, call));
    },
    wrapStream: (args) =>
      streamed(ctx, run, r.policy, (view) => inner(view).wrapStream!(args), args),
  };
}

/** A `doStream` as a step: live parts while the leg runs, the recorded parts on replay. */
async function streamed(
  ctx: Context,
  run: <T>(ctx: Context, name: string, target: Fallback<T>) => Promise<T>,
  p: Policy,
  open: (view: Policy) => PromiseLike<StreamResult>,
  args: Parameters<Wrap>[0],
): Promise<StreamResult> {
  const live = channel();
  let started = false; // the leg's content began: its parts go to the consumer live
  let began!: (meta: Omit<StreamResult, "stream"> | undefined) => void;
  const meta = new Promise<Omit<StreamResult, "stream"> | undefined>((r) => {
    began = r;
  });
  const call = oneCall(p, async (view): Promise<RecordedStream> => {
    const { stream, ...rest } = await open(view); // retried before content, inside
    started = true;
    began(rest);
    const parts: Part[] = [];
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return encode({ meta: rest, parts }) as RecordedStream;
      parts.push(value);
      live.push(value);
    }
  });
  const done = run(ctx, `stream ${args.model.modelId}`, call);
  done.then(
    () => (started ? live.close() : began(undefined)),
    (e: unknown) => (started ? live.fail(e) : began(undefined)),
  );
  const m = await meta;
  if (m !== undefined) return { ...m, stream: live.stream };
  // Replayed from the journal (the leg never ran here), or failed before content.
  const { meta: kept, parts } = decode<RecordedStream>(await done);
  return { ...(kept as Omit<StreamResult, "stream">), stream: replayed(parts as Part[]) };
}
