import type { PartialAnswer, PartialToolCall } from "../index.ts";

type Obj = Record<string, any>;
const isObj = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** Tool calls as a stream builds them, keyed by the provider's index or id. */
class Calls {
  readonly #byKey = new Map<
    string | number,
    { id?: string; name?: string; arguments: string; complete: boolean }
  >();

  at(key: string | number) {
    let c = this.#byKey.get(key);
    if (c === undefined) {
      c = { arguments: "", complete: false };
      this.#byKey.set(key, c);
    }
    return c;
  }

  /** The calls; `finished`: the stream ended its answer, so every call in it is whole. */
  list(finished: boolean): PartialToolCall[] {
    const all = [...this.#byKey.values()];
    return all.map((c, i) => ({
      ...(c.id !== undefined && { id: c.id }),
      ...(c.name !== undefined && { name: c.name }),
      arguments: c.arguments,
      // A later call started, the provider closed it, or the answer finished.
      complete: c.complete || finished || i < all.length - 1,
    }));
  }
}

/** OpenAI chat completion chunks (and compatible servers). */
export function chatAnswer(chunks: readonly unknown[]): PartialAnswer {
  let text = "";
  let finish: string | undefined;
  const calls = new Calls();
  for (const j of chunks) {
    const choice = isObj(j) ? j.choices?.[0] : undefined;
    if (!isObj(choice)) continue;
    const d = choice.delta as Obj | undefined;
    if (typeof d?.content === "string") text += d.content;
    for (const tc of Array.isArray(d?.tool_calls) ? d.tool_calls : []) {
      const c = calls.at(tc.index ?? 0);
      if (tc.id) c.id = tc.id;
      if (tc.function?.name) c.name = tc.function.name;
      if (typeof tc.function?.arguments === "string") c.arguments += tc.function.arguments;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { text, toolCalls: calls.list(finish !== undefined), finish };
}

/** OpenAI Responses API events. */
export function responsesAnswer(events: readonly unknown[]): PartialAnswer {
  let text = "";
  let finish: string | undefined;
  const calls = new Calls();
  for (const e of events) {
    if (!isObj(e)) continue;
    if (e.type === "response.output_text.delta") text += e.delta ?? "";
    else if (e.type === "response.output_item.added" && e.item?.type === "function_call") {
      const c = calls.at(e.item.id ?? e.output_index);
      c.id = e.item.call_id ?? e.item.id;
      c.name = e.item.name;
    } else if (e.type === "response.function_call_arguments.delta")
      calls.at(e.item_id ?? e.output_index).arguments += e.delta ?? "";
    else if (e.type === "response.output_item.done" && e.item?.type === "function_call") {
      const c = calls.at(e.item.id ?? e.output_index);
      c.arguments = e.item.arguments ?? c.arguments;
      c.complete = true;
    } else if (e.type === "response.completed" || e.type === "response.incomplete")
      finish = e.response?.incomplete_details?.reason ?? e.response?.status;
  }
  return { text, toolCalls: calls.list(finish !== undefined), finish };
}

/** Anthropic message stream events. */
export function anthropicAnswer(events: readonly unknown[]): PartialAnswer {
  let text = "";
  let finish: string | undefined;
  const calls = new Calls();
  const toolBlocks = new Set<number>();
  for (const e of events) {
    if (!isObj(e)) continue;
    if (e.type === "content_block_start" && e.content_block?.type === "tool_use") {
      toolBlocks.add(e.index);
      const c = calls.at(e.index);
      c.id = e.content_block.id;
      c.name = e.content_block.name;
    } else if (e.type === "content_block_delta") {
      if (e.delta?.type === "text_delta") text += e.delta.text ?? "";
      else if (e.delta?.type === "input_json_delta")
        calls.at(e.index).arguments += e.delta.partial_json ?? "";
    } else if (e.type === "content_block_stop" && toolBlocks.has(e.index))
      calls.at(e.index).complete = true;
    else if (e.type === "message_delta" && e.delta?.stop_reason) finish = e.delta.stop_reason;
  }
  return { text, toolCalls: calls.list(finish !== undefined), finish };
}

/** Gemini stream chunks: a function call arrives whole, in one part. */
export function googleAnswer(chunks: readonly unknown[]): PartialAnswer {
  let text = "";
  let finish: string | undefined;
  const calls = new Calls();
  let n = 0;
  for (const j of chunks) {
    const cand = isObj(j) ? j.candidates?.[0] : undefined;
    if (!isObj(cand)) continue;
    for (const part of Array.isArray(cand.content?.parts) ? cand.content.parts : []) {
      if (typeof part?.text === "string" && !part.thought) text += part.text;
      if (isObj(part?.functionCall)) {
        const c = calls.at(n++);
        if (part.functionCall.id) c.id = part.functionCall.id;
        c.name = part.functionCall.name;
        c.arguments = JSON.stringify(part.functionCall.args ?? {});
        c.complete = true;
      }
    }
    if (cand.finishReason) finish = cand.finishReason;
  }
  return { text, toolCalls: calls.list(finish !== undefined), finish };
}

/** AI SDK stream parts (language model specification v4). */
export function aiSdkAnswer(parts: readonly unknown[]): PartialAnswer {
  let text = "";
  let finish: string | undefined;
  const calls = new Calls();
  for (const p of parts) {
    if (!isObj(p)) continue;
    if (p.type === "text-delta") text += p.delta ?? "";
    else if (p.type === "tool-input-start") {
      const c = calls.at(p.id);
      c.id = p.id;
      c.name = p.toolName;
    } else if (p.type === "tool-input-delta") calls.at(p.id).arguments += p.delta ?? "";
    else if (p.type === "tool-input-end") calls.at(p.id).complete = true;
    else if (p.type === "tool-call") {
      const c = calls.at(p.toolCallId);
      c.id = p.toolCallId;
      c.name = p.toolName;
      c.arguments = typeof p.input === "string" ? p.input : JSON.stringify(p.input ?? {});
      c.complete = true;
    } else if (p.type === "finish") finish = p.finishReason?.unified ?? p.finishReason;
  }
  return { text, toolCalls: calls.list(finish !== undefined), finish };
}

/** LangChain ChatGenerationChunks (or message chunks). */
export function langchainAnswer(chunks: readonly unknown[]): PartialAnswer {
  let text = "";
  let finish: string | undefined;
  const calls = new Calls();
  for (const c of chunks) {
    if (!isObj(c)) continue;
    const message = (c.message ?? c) as Obj;
    const t = c.text ?? message.text;
    if (typeof t === "string") text += t;
    for (const tc of Array.isArray(message.tool_call_chunks) ? message.tool_call_chunks : []) {
      const call = calls.at(tc.index ?? tc.id ?? 0);
      if (tc.id) call.id = tc.id;
      if (tc.name) call.name = tc.name;
      if (typeof tc.args === "string") call.arguments += tc.args;
    }
    const reason = c.generationInfo?.finish_reason ?? message.response_metadata?.finish_reason;
    if (reason) finish = reason;
  }
  return { text, toolCalls: calls.list(finish !== undefined), finish };
}
