/**
 * Restate: breakwater as the one retry layer inside a Restate handler. `run(ctx, name, fn)`
 * is `ctx.run` with breakwater's policy inside: short waits are slept in the step, a longer
 * one (a Retry-After of 20 s, an open breaker's cool-off) is a durable `ctx.sleep` between
 * two legs of the step, and a final failure (a 400, attempts spent, a Retry-After past the
 * cap) is a `TerminalError`, so Restate retries none of what breakwater would not.
 *
 * @example
 * ```ts
 * import * as restate from "@restatedev/restate-sdk";
 * import OpenAI from "openai";
 * import { policy } from "breakwater";
 * import { withBreakwater } from "breakwater/openai";
 * import { run } from "breakwater/restate";
 *
 * const p = policy();
 * const openai = withBreakwater(new OpenAI(), { policy: p });
 * export const agent = restate.service({
 *   name: "agent",
 *   handlers: {
 *     ask: async (ctx: restate.Context, question: string) =>
 *       run(ctx, "answer", async ({ signal }) => {
 *         const r = await openai.chat.completions.create(
 *           { model: "gpt-4o-mini", messages: [{ role: "user", content: question }] },
 *           { signal },
 *         );
 *         return r.choices[0]?.message.content ?? "";
 *       }, { policy: p }),
 *   },
 * });
 * ```
 * @module breakwater/restate
 */
import { type Context, TerminalError } from "@restatedev/restate-sdk";
import { reasonOf, type StepState } from "../index.ts";
import { type DurableCallsOptions, durableCallsMiddleware } from "./restate-ai-sdk.ts";
import {
  finalWords,
  type Leg,
  leg,
  resolveStep,
  type StepOptions,
  type StepTarget,
} from "./step.ts";

export type { StepContext } from "../index.ts";
export type { DurableCallsOptions } from "./restate-ai-sdk.ts";
export type { StepOperation, StepOptions, StepTarget } from "./step.ts";

/** How many steps of each name this handler's execution has run: the n-th keys the n-th
 * (a replay runs the handler again from the start, so it counts the same). */
const seen = new WeakMap<object, Map<string, number>>();

/** The step's key: the invocation, the step's name, and which of that name it is. */
function keyOf(ctx: Context, name: string): string {
  let names = seen.get(ctx);
  if (names === undefined) seen.set(ctx, (names = new Map()));
  const n = (names.get(name) ?? 0) + 1;
  names.set(name, n);
  return `${ctx.request().id}:${name}:${n}`;
}

/** A final failure as Restate records it: terminal, breakwater's reason in its metadata. */
function terminal(error: unknown): unknown {
  if (error instanceof TerminalError) return error;
  const reason = reasonOf(error);
  return new TerminalError(finalWords(error), {
    metadata: { "breakwater.reason": reason ?? "failed" },
  });
}

/**
 * `ctx.run` under breakwater's policy (docs/architecture.md, rule 22), or over a chain
 * (`fallback`, `pool`: a long wait or an open breaker at one upstream is a switch inside
 * the step while another can take the call). The operation gets
 * the attempt's signal and the step's `idempotencyKey` (the invocation, the step's name
 * and its place: the same across retries, legs and replays; `runId` for `guardTool`).
 * Each leg is a `ctx.run` entry in the journal; a wait between two legs is a `ctx.sleep`,
 * so the process holds nothing while it runs and a restart resumes it; the step's
 * attempts and deadline go on across legs. Returns the operation's value (JSON, as
 * `ctx.run` keeps it); a final failure is thrown as a `TerminalError`.
 */
export async function run<T>(
  ctx: Context,
  name: string,
  target: StepTarget<T>,
  options?: StepOptions,
): Promise<T> {
  const r = resolveStep("breakwater/restate run", target, options);
  const key = keyOf(ctx, name);
  let state: StepState | undefined;
  for (;;) {
    const label = state === undefined ? name : `${name} (leg ${state.legs + 1})`;
    const done: AbortSignal = ctx.request().attemptCompletedSignal;
    const out: Leg<T> = await ctx.run(label, async () => {
      try {
        return await leg(r, target, key, state, done);
      } catch (error) {
        throw terminal(error);
      }
    });
    if (out.ok) return out.value;
    state = out.state;
    await ctx.sleep(out.waitMs, `${name}: ${out.reason}`);
  }
}

/**
 * The AI SDK middleware for a Restate handler, in place of
 * `@restatedev/vercel-ai-middleware`'s `durableCalls(ctx)`: every `doGenerate` and
 * `doStream` of the wrapped model is a `run` step of the handler, classified by
 * breakwater (a 400 is a `TerminalError`, never 3 × 2 requests), a long wait a `ctx.sleep`,
 * the answer journaled. A stream's parts reach the consumer as they arrive, and are never
 * replayed after the first.
 *
 * ```ts
 * const model = wrapLanguageModel({ model: openai("gpt-4o-mini"), middleware: durableCalls(ctx) });
 * const { text } = await generateText({ model, prompt, maxRetries: 0 });
 * ```
 */
export function durableCalls(ctx: Context, options: DurableCallsOptions = {}) {
  return durableCallsMiddleware(ctx, options, run);
}
