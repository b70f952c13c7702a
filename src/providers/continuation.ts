import type { ContinueFrom, OpenStream } from "../index.ts";
import type { Dialect, Lead } from "./dialect.ts";
import type { SseChunk, SseEvent } from "./sse.ts";

/** The prefill a broken answer may go on from, and the whitespace it was trimmed of
 * (providers refuse a prefill that ends in whitespace); undefined when it may not go on:
 * no text, or a tool call (one may be half-sent). */
export function prefillOf(
  answer:
    | {
        readonly text: string;
        readonly toolCalls: readonly unknown[];
      }
    | undefined,
): { prefill: string; lead: Lead } | undefined {
  if (answer === undefined || answer.toolCalls.length > 0) return undefined;
  const prefill = answer.text.trimEnd();
  if (prefill === "") return undefined;
  return { prefill, lead: { strip: answer.text.length - prefill.length, taken: 0 } };
}

/**
 * The fetch layer's continuation (opt-in, docs/architecture.md rule 4): the request again,
 * asking the model to go on from the text the consumer read (what `dialect.continueWith`
 * makes of it), its events shaped to go on with the first answer. The policy decides
 * whether it goes (a retry of the same call); this only says how.
 */
export function continueEvents(
  url: string,
  body: string,
  dialect: Dialect,
  open: (body: string) => OpenStream<SseChunk>,
): ContinueFrom<SseChunk> {
  return (partial) => {
    const go = prefillOf(partial.answer);
    if (go === undefined || dialect.continueWith === undefined) return undefined;
    const next = dialect.continueWith(url, JSON.parse(body) as Record<string, unknown>, go.prefill);
    if (next === undefined) return undefined;
    const opening = open(JSON.stringify(next));
    return async (ctx) => shaped(await opening(ctx), dialect, go.lead);
  };
}

/** The continuation's events, each as the dialect says the SDK should read it. */
async function* shaped(
  chunks: AsyncIterable<SseChunk>,
  dialect: Dialect,
  lead: Lead,
): AsyncGenerator<SseEvent> {
  for await (const chunk of chunks)
    for (const e of chunk.events()) {
      const out = dialect.resume === undefined ? e : dialect.resume(e.json, e, lead);
      if (out !== undefined) yield out;
    }
}
