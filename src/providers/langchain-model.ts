/** A LangChain chat model under the policy (the body of `breakwater/langchain`). */
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import {
  type CallOptions,
  ConfigError,
  type Limiter,
  type PartialAnswer,
  type Policy,
  type Usage,
} from "../index.ts";
import { langchainAnswer } from "./answers.ts";
import { type Ask, askedAgain, gaveUpOn } from "./given-up.ts";
import { inAttempt, inAttemptIterable } from "./scope.ts";
import {
  ADAPTER_SPEC,
  type AdapterOptions,
  adapterOptions,
  asPolicy,
  chatLabels,
  frameworkFetch,
  marked,
  runFor,
} from "./shared.ts";

/** What `withBreakwater` takes for a LangChain chat model: the policy and the run. */
export type LangChainAdapterOptions = AdapterOptions;

type Obj = Record<string, any>;
const OWNER = "langchain.withBreakwater";
type Method = (this: Obj, messages: unknown, options?: Obj, runManager?: unknown) => any;

/** Usage from a message's standard `usage_metadata` (every LangChain chat model sets it). */
export function langchainUsage(x: unknown): Partial<Usage> | undefined {
  const o = x as Obj | null;
  const u = (o?.usage_metadata ??
    o?.message?.usage_metadata ??
    o?.generations?.[0]?.message?.usage_metadata) as Obj | undefined;
  if (!u) return undefined;
  return {
    ...(typeof u.input_tokens === "number" && { inputTokens: u.input_tokens }),
    ...(typeof u.output_tokens === "number" && { outputTokens: u.output_tokens }),
  };
}

/** A stream chunk that carries content: text, or a tool call's arguments (a chunk that
 * only announces a call, its name and id, is a head: a retry announces it again). */
export function isLangChainContent(chunk: unknown): boolean {
  const c = chunk as Obj | null;
  const text = c?.text ?? c?.message?.text;
  const calls = c?.message?.tool_call_chunks;
  return (
    (typeof text === "string" && text !== "") ||
    (Array.isArray(calls) && calls.some((t: Obj | null) => Boolean(t?.args)))
  );
}

/** A content event of LangChain's content-block protocol (`_streamChatModelEvents`). */
const isEventContent = (event: unknown): boolean =>
  String((event as Obj | null)?.event ?? (event as Obj | null)?.type).includes("Delta");

/** The SDK client options a LangChain model builds its clients from (ChatOpenAI's
 * `clientConfig`, ChatAnthropic's `clientOptions`), and the clients it keeps made of them. */
const CLIENT_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  clientConfig: ["client"],
  clientOptions: ["streamingClient", "batchClient"],
};

/** `model`, with every AsyncCaller it uses (its own, and its delegates': ChatOpenAI keeps a
 * completions and a responses model) at zero retries, and the SDK clients it builds given a
 * fetch whose every answer the limiter hears (the model hands back no headers: rule 16) and
 * that hands on an error in a 2xx body as its status.
 * Nothing of `model` is changed. */
function withoutRetries(model: Obj, limiter: Limiter | undefined, depth = 0): Obj {
  const own = Object.create(model) as Obj;
  if (model.caller && typeof model.caller.maxRetries === "number")
    own.caller = Object.create(model.caller, { maxRetries: { value: 0 } });
  for (const [key, clients] of Object.entries(CLIENT_OPTIONS)) {
    const o = model[key];
    // An X.509 workload identity refuses any fetch of its own: such a client is left be.
    if (o === null || typeof o !== "object" || o.workloadIdentity !== undefined) continue;
    own[key] = { ...o, fetch: frameworkFetch(limiter, o.fetch) };
    // A client not built yet is built on `own`, from the options above; one built already
    // (or handed in) is given the fetch through `withOptions`, or left as it is.
    for (const c of clients) if (model[c] != null) own[c] = hearingClient(model[c], limiter);
  }
  if (depth === 0)
    for (const key of Object.keys(model)) {
      const v = model[key];
      if (
        v !== null &&
        typeof v === "object" &&
        v !== model &&
        v.caller &&
        typeof v._generate === "function"
      )
        own[key] = withoutRetries(v, limiter, 1);
    }
  return own;
}

/** A Stainless SDK client (openai, anthropic) whose answers `limiter` hears; another
 * object, or one that refuses a fetch, as it is. */
function hearingClient(client: Obj, limiter: Limiter | undefined): Obj {
  if (typeof client.withOptions !== "function") return client;
  try {
    return client.withOptions({ fetch: frameworkFetch(limiter, client.fetch) });
  } catch {
    return client;
  }
}

type CallFor = (opts: Obj) => CallOptions;

/**
 * Routes a LangChain chat model (`ChatOpenAI`, `ChatAnthropic`, `ChatGoogleGenerativeAI`, any
 * `BaseChatModel`) through one policy: its AsyncCaller retries are off (LangChain's default
 * is 6), and `invoke`, `batch`, `stream`, `streamEvents` and tool calling (`bindTools`) run
 * each provider call under the policy; a stream is retried until its first content chunk.
 * Returns a new model that reads through to `model`, which is left as it was.
 */
export function withBreakwater<M extends BaseChatModel>(
  model: M,
  options: LangChainAdapterOptions = {},
): M {
  const m = checkModel(model);
  adapterOptions(OWNER, ADAPTER_SPEC, options);
  const p = asPolicy(options.policy);
  const wrapped = withoutRetries(m, p.options.limiter);
  // What the wrapped methods run on: the originals, so a `_generate` that streams inside
  // (ChatAnthropic with `streaming: true`) is one policy call, not two nested.
  const inner = Object.create(wrapped) as Obj;
  const names = labels(m);
  const call: CallFor = (opts) => ({
    ...names,
    ...(opts.signal && { signal: opts.signal as AbortSignal }),
    ...runFor(options),
  });
  const key = modelKey(p, names);
  wrapped._generate = generate(p, inner, m._generate as Method, call, key);
  inner._streamResponseChunks = m._streamResponseChunks;
  wrapped._streamResponseChunks = streamed(
    p,
    inner,
    call,
    m._streamResponseChunks,
    isLangChainContent,
    langchainAnswer,
    key,
  );
  if (overrides(m, "_streamChatModelEvents")) {
    inner._streamChatModelEvents = m._streamChatModelEvents;
    wrapped._streamChatModelEvents = streamed(
      p,
      inner,
      call,
      m._streamChatModelEvents,
      isEventContent,
      undefined,
      key,
    );
  }
  // ChatOpenAI's withConfig (and so bindTools) builds a new model from its fields: wrap
  // that one too, under the same policy.
  const withConfig = m.withConfig as ((config: unknown) => unknown) | undefined;
  if (typeof withConfig === "function")
    wrapped.withConfig = (config: unknown) => {
      const next = withConfig.call(inner, config) as Obj;
      const isModel =
        next !== null && typeof next === "object" && typeof next._generate === "function";
      return isModel && next !== inner
        ? withBreakwater(next as M, { ...options, policy: p })
        : next;
    };
  return marked(wrapped, OWNER, p) as M;
}

/** The model, if it is a LangChain chat model; a ConfigError naming it if not. */
function checkModel(model: unknown): Obj {
  const m = model as Obj;
  if (
    m === null ||
    typeof m !== "object" ||
    typeof m._generate !== "function" ||
    typeof m.invoke !== "function"
  )
    throw new ConfigError(
      OWNER,
      "model",
      model,
      "a LangChain chat model (new ChatOpenAI(...), ...)",
    );
  return m;
}

/** What a call of the model is, as telemetry names it: its model field and its type. */
function labels(m: Obj): { model?: string; provider?: string; operation: string } {
  const model = [m.model, m.modelName].find((x) => typeof x === "string" && x !== "");
  let type: unknown;
  try {
    type = typeof m._llmType === "function" ? m._llmType() : undefined;
  } catch {}
  return chatLabels(model, type);
}

/** The model that answered, as a LangChain result or chunk's metadata names it. */
function answeringModel(x: unknown): string | undefined {
  const r = x as Obj | null;
  const message = r?.generations?.[0]?.message ?? r?.message ?? r;
  const meta = message?.response_metadata as Obj | undefined;
  const name = meta?.model_name ?? meta?.model;
  return typeof name === "string" && name !== "" ? name : undefined;
}

/** A call of this model, as the give-up record knows it (a retry of it by a layer above,
 * modelRetryMiddleware's included, gets the same give-up: given-up.ts). The model is named
 * by its policy and labels: createAgent binds its tools anew at each call (withConfig), so
 * the object differs between a call and its retry. */
const askOf = (messages: unknown, model: string, p: Policy): Ask => ({
  turns: messages,
  model,
  owner: OWNER,
  layer: () => "modelRetryMiddleware, withRetry or a retry loop",
  now: () => p.options.clock.now(),
});

const policyIds = new WeakMap<Policy, number>();
let policies = 0;
/** The name a give-up knows this model by: its policy and its telemetry labels. */
function modelKey(p: Policy, names: { model?: string; provider?: string }): string {
  let id = policyIds.get(p);
  if (id === undefined) policyIds.set(p, (id = ++policies));
  return `${id}\u0000${names.provider ?? ""}\u0000${names.model ?? ""}`;
}

/** `_generate` under the policy: one provider call per attempt, the attempt's signal in. */
function generate(p: Policy, inner: Obj, method: Method, call: CallFor, key: string) {
  return async (messages: unknown, opts: Obj = {}, runManager?: unknown) => {
    const ask = askOf(messages, key, p);
    const prior = askedAgain(ask);
    if (prior) throw prior.error;
    return p
      .execute(
        async (ctx) => {
          const r = await inAttempt(ctx.attempt, () =>
            method.call(inner, messages, { ...opts, signal: ctx.signal }, runManager),
          );
          const model = answeringModel(r);
          if (model !== undefined) ctx.answeredBy(model);
          return r;
        },
        { ...call(opts), usage: langchainUsage },
      )
      .catch((e: unknown) => {
        throw gaveUpOn(ask, e);
      });
  };
}

/** A streaming method under the policy: retried until its first content chunk. */
function streamed(
  p: Policy,
  inner: Obj,
  call: CallFor,
  method: Method,
  isContent: (c: unknown) => boolean,
  answer: ((chunks: readonly unknown[]) => PartialAnswer) | undefined,
  key: string,
) {
  return (messages: unknown, opts: Obj = {}, runManager?: unknown) => {
    const ask = askOf(messages, key, p);
    const prior = askedAgain(ask);
    if (prior) return failing(prior.error);
    const chunks = p.stream(
      (ctx) =>
        inAttemptIterable(
          ctx.attempt,
          method.call(inner, messages, { ...opts, signal: ctx.signal }, runManager) as never,
        ),
      {
        ...call(opts),
        isContent,
        usage: langchainUsage,
        ...(answer && { answer }),
      },
    );
    return recorded(chunks, ask);
  };
}

/** A stream that fails at its first read, as a stream the policy gave up on does. */
function failing(error: unknown): AsyncIterable<never> {
  return {
    [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(error) }),
  };
}

/** The chunks as they come; a give-up recorded as final for its call (an iterator that
 * passes each read on: a generator around it cost ~180 ns a chunk). */
function recorded<T>(chunks: AsyncIterable<T>, ask: Ask): AsyncIterable<T> {
  const failed = (e: unknown): never => {
    throw gaveUpOn(ask, e);
  };
  const done: IteratorResult<T> = { done: true, value: undefined };
  return {
    [Symbol.asyncIterator]() {
      const it = chunks[Symbol.asyncIterator]();
      return {
        next: () => it.next().catch(failed),
        return: async (value?: unknown) => (await it.return?.(value)) ?? done,
      };
    },
  };
}

/** Whether the model's class defines `name` itself, rather than inheriting BaseChatModel's
 * default (which only bridges to `_streamResponseChunks`, already wrapped). */
function overrides(model: Obj, name: string): boolean {
  let definer: object | null = null;
  for (let p = Object.getPrototypeOf(model); p !== null; p = Object.getPrototypeOf(p))
    if (Object.hasOwn(p, name)) definer = p;
  return (
    typeof model[name] === "function" && definer !== null && model[name] !== (definer as Obj)[name]
  );
}
