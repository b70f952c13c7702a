import {
  type OutputCheck,
  OutputError,
  type OutputOptions,
  type PartialAnswer,
  RequestCheckError,
  TRUNCATED_FINISH,
} from "../index.ts";

type Obj = Record<string, any>;
const isObj = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** A whole (non-streamed) answer as a dialect reads it. */
export interface Reply {
  readonly text?: string | undefined;
  readonly finish?: string | undefined;
  readonly refusal?: string | undefined;
}

/** What a provider's request and answers say, for the checks before and after a call. */
export interface CheckDialect {
  /** A JSON answer's text, finish reason and refusal. */
  reply?(json: unknown): Reply | undefined;
  /** The answer so far of a stream. */
  answer?(events: readonly unknown[]): PartialAnswer;
  /** What is wrong with the request's transcript, if anything. */
  transcript?(url: string, body: Obj): string | undefined;
  /** The output tokens the request allows. */
  maxOutput?(body: Obj): number | undefined;
}

/** How an adapter checks answers: truncation as an error (the default) or not, and the
 * call's own `validate`. */
export interface Checks {
  readonly truncation: "error" | "allow";
  readonly validate: OutputCheck | undefined;
  /** A schema reads the JSON inside a markdown fence (OutputOptions.fencedJson). */
  readonly fencedJson?: boolean;
}

/** The text a schema or check reads: a refusal is an invalid answer where one is wanted. */
function textOf(reply: Reply | undefined, validating: boolean): string | undefined {
  if (validating && reply?.refusal)
    throw new OutputError("refusal", `the model refused: ${reply.refusal}`, {
      text: reply.refusal,
    });
  return reply?.text;
}

/** Output options over one whole answer (`json` reads it off the result), or undefined
 * when nothing is checked. */
export function replyChecks<R>(
  dialect: CheckDialect,
  c: Checks,
  json: (r: R) => unknown,
): OutputOptions<R> | undefined {
  const read = dialect.reply;
  if (read === undefined || (c.truncation === "allow" && c.validate === undefined))
    return undefined;
  return {
    answerOf: (r) => textOf(read(json(r)), c.validate !== undefined),
    truncated: (r) => c.truncation === "error" && TRUNCATED_FINISH.has(read(json(r))?.finish ?? ""),
    ...(c.validate !== undefined && { validate: c.validate }),
    ...(c.fencedJson === false && { fencedJson: false }),
  };
}

/** How many of a stream's last events hold its finish reason, whatever the provider. */
const TAIL = 8;

/** Output options over a stream's chunks (`jsons` reads the events in them, parsed), or
 * undefined when nothing is checked. */
export function streamChecks<E>(
  dialect: CheckDialect,
  c: Checks,
  jsons: (chunks: readonly E[]) => readonly unknown[],
): OutputOptions<readonly E[]> | undefined {
  const answer = dialect.answer;
  if (answer === undefined || (c.truncation === "allow" && c.validate === undefined))
    return undefined;
  const read = (chunks: readonly E[]) => answer(jsons(chunks));
  return {
    answerOf: (events) => read(events).text,
    // The finish reason is in the last events (the usage chunk may follow it): no need to
    // parse the whole stream to read it. Each chunk holds at least one event.
    truncated: (events) =>
      c.truncation === "error" && TRUNCATED_FINISH.has(read(events.slice(-TAIL)).finish ?? ""),
    ...(c.validate !== undefined && { validate: c.validate }),
    ...(c.fencedJson === false && { fencedJson: false }),
  };
}

/** A lower bound on a request's prompt tokens: no tokenizer packs more than 8 bytes into one
 * token of ordinary text, so this never overstates. */
const promptFloor = (body: string) => Math.floor(Buffer.byteLength(body) / 8);

/** The output allowance a request asks for, as its dialect reads it: a count, or
 * undefined when it names none (or names something that is not a count). */
function allowance(dialect: CheckDialect | undefined, body: unknown): number | undefined {
  if (!isObj(body)) return undefined;
  const n = dialect?.maxOutput?.(body);
  return typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** What a request is expected to spend, for a rate limiter: its body at ~4 characters a
 * token (corrected from usage after the call) and its output allowance. */
export function estimateCost(
  dialect: CheckDialect | undefined,
  raw: string,
  body: unknown,
): { inputTokens: number; outputTokens: number } {
  return { inputTokens: Math.ceil(raw.length / 4), outputTokens: allowance(dialect, body) ?? 0 };
}

/** What makes a request fail for sure, found before it is sent (nothing spent). `body` is
 * `raw` parsed (undefined when it is not JSON: not ours to judge). */
export function checkRequest(
  dialect: CheckDialect,
  url: string,
  raw: string,
  body: unknown,
  contextTokens: number | undefined,
): RequestCheckError | undefined {
  if (!isObj(body)) return undefined;
  const broken = dialect.transcript?.(url, body);
  if (broken !== undefined) return new RequestCheckError("transcript", broken);
  const max = allowance(dialect, body);
  if (contextTokens === undefined || max === undefined) return undefined;
  const floor = promptFloor(raw);
  if (max + floor <= contextTokens) return undefined;
  return new RequestCheckError(
    "max-output",
    `the request allows ${max} output tokens, and its prompt is at least ${floor}: more than the model's ${contextTokens}-token context window`,
  );
}

/** OpenAI chat: every tool message answers a call of the assistant message before it, and
 * every call is answered before the conversation goes on. */
export function chatTranscript(_url: string, body: Obj): string | undefined {
  const messages: unknown[] = Array.isArray(body.messages) ? body.messages : [];
  // The tool calls the last assistant turn made and no tool message has answered yet. Made
  // only for a turn with tool calls: a long conversation is read on every request.
  let open: Set<unknown> | undefined;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isObj(m)) continue;
    if (m.role === "tool") {
      if (!open?.delete(m.tool_call_id))
        return `messages[${i}] answers tool call ${JSON.stringify(m.tool_call_id)}, which no earlier assistant message made`;
      continue;
    }
    if (open !== undefined && open.size > 0)
      return `messages[${i}] comes before tool call ${JSON.stringify([...open][0])} was answered`;
    const calls = m.role === "assistant" ? m.tool_calls : undefined;
    open =
      Array.isArray(calls) && calls.length > 0 ? new Set(calls.map((c: Obj) => c?.id)) : undefined;
  }
  return undefined;
}

/** The blocks of a message's content of one type (none when the content is text). */
function blocksOf(m: Obj, type: string): Obj[] | undefined {
  if (!Array.isArray(m.content)) return undefined;
  let found: Obj[] | undefined;
  for (const b of m.content) if (isObj(b) && b.type === type) (found ??= []).push(b);
  return found;
}

/** Anthropic: every `tool_result` answers a `tool_use` of the assistant turn just before, and
 * every `tool_use` is answered in the user turn that follows. */
export function anthropicTranscript(_url: string, body: Obj): string | undefined {
  const messages: unknown[] = Array.isArray(body.messages) ? body.messages : [];
  let open: Set<unknown> | undefined;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isObj(m)) continue;
    if (m.role === "user") {
      for (const b of blocksOf(m, "tool_result") ?? [])
        if (!open?.delete(b.tool_use_id))
          return `messages[${i}] has a tool_result for ${JSON.stringify(b.tool_use_id)}, which the assistant turn before did not call`;
      if (open !== undefined && open.size > 0)
        return `messages[${i}] leaves tool_use ${JSON.stringify([...open][0])} without its tool_result`;
      continue;
    }
    const uses = blocksOf(m, "tool_use");
    open = uses === undefined ? undefined : new Set(uses.map((b) => b.id));
  }
  return undefined;
}

/** An answer that stands for an error the SDK raises as it is: reading it rejects with it. */
export class FailedAnswer extends Response {
  readonly #error: unknown;
  constructor(error: unknown, headers?: Headers) {
    // A body that errors too, for an SDK that reads a stream from it.
    const body = new ReadableStream<Uint8Array>({ pull: (c) => c.error(error) });
    super(body, { status: 200, headers: headers ?? { "content-type": "application/json" } });
    this.#error = error;
  }
  override json(): Promise<any> {
    return Promise.reject(this.#error);
  }
  override text(): Promise<string> {
    return Promise.reject(this.#error);
  }
  override arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.reject(this.#error);
  }
}
