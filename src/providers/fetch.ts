/**
 * The fetch layer under every adapter: a `fetch` that retries by the policy, reads
 * streams for content and usage, and feeds the limiter the rate-limit headers. Give it to any
 * client that takes a `fetch`.
 *
 * @example
 * ```ts
 * import OpenAI from "openai";
 * import { guardedFetch } from "breakwater/fetch";
 *
 * // What withBreakwater does for you, by hand: the client's retries off, ours in its fetch.
 * const client = new OpenAI({ maxRetries: 0, fetch: guardedFetch() });
 * const r = await client.chat.completions.create({
 *   model: "gpt-4o-mini",
 *   messages: [{ role: "user", content: "Hello" }],
 * });
 * console.log(r.choices[0]?.message.content);
 * ```
 * @module breakwater/fetch
 */
import {
  type AttemptContext,
  type CallOptions,
  ConfigError,
  type Effect,
  type ExecuteOptions,
  failureOf,
  type GuardedStream,
  HttpError,
  Ledger,
  ledgerOf,
  type OutputCheck,
  OutputError,
  type OutputOptions,
  type Policy,
  partialOf,
  policy,
  type Run,
  reasonOf,
  type Usage,
} from "../index.ts";
import {
  ambientAttempt,
  CALL_SPEC,
  CHECKED,
  EFFECTS,
  markLayer,
  type OuterAttempt,
  opt,
  SHOWN,
  streamBehind,
  tagError,
  Validator,
  wantAmbient,
} from "../internal.ts";
import {
  type Checks,
  checkRequest,
  estimateCost,
  FailedAnswer,
  replyChecks,
  streamChecks,
} from "./checks.ts";
import { continueEvents } from "./continuation.ts";
import {
  answeringModel,
  type Dialect,
  errorBodyOf,
  errorBodyStatus,
  requestModel,
  safeJson,
} from "./dialect.ts";
import { sniffDialect } from "./dialects/sniff.ts";
import { answerOf as recordOf, replay, slotFor } from "./journaled.ts";
import { saysStream, withKeys } from "./json-text.ts";
import { type Ends, endsWithData, passThrough } from "./pass-through.ts";
import { ReadResponse } from "./read-response.ts";
import { currentAttempt, gaveUp, sdkBody, sdkTimeout, seenAs } from "./scope.ts";
import {
  ADAPTER_SPEC,
  type AdapterOptions,
  adapterOptions,
  asPolicy,
  FETCH_SPEC,
  hear,
  runOf,
} from "./shared.ts";
import { eventsOf, type SseChunk, type SseEvent, SseRun, sseEvents, type Tail } from "./sse.ts";
import { type Marks, markedReads, marksOf, tailOf } from "./sse-runs.ts";
import { hasUndici, wire } from "./transport.ts";

export type { Dialect, Lead } from "./dialect.ts";

/** What `guardedFetch` takes: the policy and run every request draws on, the transport (fetch, connect timeout), the attempt header, the dialect that reads the provider's answers, and the output checks. */
export interface GuardedFetchOptions extends AdapterOptions {
  /** The fetch each attempt calls. Default: the global fetch. */
  fetch?: typeof globalThis.fetch;
  /** How to read the provider's answers. Default: the dialect a request's path names
   * (OpenAI's `/chat/completions`, `/responses`, `/completions`, `/embeddings`; Anthropic's
   * `/v1/messages`; Google's `:generateContent`, `:streamGenerateContent`), read only: it
   * changes no body. A path none names is read blind: every stream event counts as content
   * (no retry once the first arrives), and no usage or in-band error is read. */
  dialect?: Dialect;
  /** Gives up an attempt whose TCP/TLS connection is not up within this many ms (undici's
   * `connect.timeout`; needs the `undici` package). Default: the fetch's own (10 s). */
  connectTimeoutMs?: number;
  /** The header that carries the attempt number, so a server or proxy can tell retries
   * apart and shed them first. A request that already has `x-stainless-retry-count` (the
   * openai and anthropic SDKs) gets the retries so far there instead. `false`: none.
   * Default "x-retry-attempt". */
  attemptHeader?: string | false;
  /** Opt-in: when a stream breaks after content with a failure that could be retried, ask
   * the model to go on from the text so far (assistant prefill) and stream only the rest,
   * so the consumer reads one answer. Where the dialect supports it (Anthropic; OpenAI-
   * compatible servers with an assistant `prefix` option, such as DeepSeek and Mistral);
   * never after a tool call, never past the deadline, the attempts or the admission.
   * @default false */
  continuation?: boolean;
  /** A truncated answer (stopped at the token limit) is an OutputError, never retried
   * ("error"), or handed over as it came ("allow"). @default "error" */
  truncation?: "error" | "allow";
  /** A `validate` schema reads the JSON inside a markdown code fence that is the whole
   * answer (```` ```json ... ``` ````); `false`: a fenced answer fails as `parse`.
   * @default true */
  fencedJson?: boolean;
  /** The model's context window in tokens: a request whose output allowance leaves no room
   * for its prompt fails before it is sent. @default unchecked */
  contextTokens?: number;
  /** A request that changes state on the server (rule 20) and failed after it may have
   * arrived is not sent again: this is asked what became of it instead (read the
   * conversation's last items, list the batches). Return the answer's JSON as the API would
   * have (the SDK reads it as the answer), or undefined to let the `outcome-unknown` error
   * through. Not asked for streams. @default none */
  reconcile?: Reconcile;
}

/** What `reconcile` is told: the request that may or may not have taken effect. */
export interface Unknown {
  readonly url: string;
  readonly method: string;
  /** The request's JSON body (undefined when it is not JSON). */
  readonly body: unknown;
  /** The `outcome-unknown` error the call would fail with; its cause is the last attempt's. */
  readonly error: unknown;
}

/** Finds out what became of a request whose outcome is unknown: the answer's JSON, or
 * undefined when it did not take effect or cannot be told. */
export type Reconcile = (request: Unknown) => unknown;

const SPEC = {
  ...FETCH_SPEC,
  fetch: opt.fn<typeof globalThis.fetch>(),
  dialect: opt.any<Dialect>(
    (d) => typeof (d as Dialect | null)?.isContent === "function",
    "a Dialect (an object with isContent())",
  ),
};

/** What one call carries to the fetch layer, through the SDK's `fetchOptions`. */
const CALL = Symbol.for("breakwater.call");

/** @internal On a request's init, `{ text, json }`: the object its JSON body `text` was
 * made of (read, never changed), from a caller that parsed or built it (the gateway). The
 * fetch layer reads it rather than parsing a long conversation again, and only while the
 * body is still that text (a wrapper that rewrote the body has it parsed as it is). */
export const BODY_JSON = Symbol.for("breakwater.bodyJson");

/** The object `body` was made of, when its caller said so with BODY_JSON. */
function givenJson(init: RequestInit, body: string): Record<string, unknown> | undefined {
  const given = (init as { [BODY_JSON]?: { text?: unknown; json?: unknown } })[BODY_JSON];
  return given?.text === body && given.json !== null && typeof given.json === "object"
    ? (given.json as Record<string, unknown>)
    : undefined;
}

/** What one call of a wrapped client may carry. */
export interface PerCall {
  /** The run this call draws on. */
  run?: Run;
  /** Where this call stands in the policy's rate-limiter queue: higher goes first.
   * @default the run's priority, else 0 */
  priority?: number;
  /** Checks the answer's text before it counts (a Standard Schema, read as JSON; or a
   * function): a failed check is retried within the call's attempts. */
  validate?: OutputCheck;
  /** What sending this request again does, when you know better than the adapter's
   * reading of it (rule 20): "idempotent" marks a stateful request safe to send again,
   * "unsafe" marks one the adapter does not know. @default the adapter's reading */
  effect?: Effect;
  /** This call's `reconcile` (see the adapter's option). */
  reconcile?: Reconcile;
  /** This call's deadline in ms, in place of the policy's `deadlineMs`. */
  deadlineMs?: number;
  /** This call's attempt timeout in ms, in place of the policy's `attemptTimeoutMs` (and of
   * the SDK's own `timeout`). */
  attemptTimeoutMs?: number;
  /** Fewer attempts than the policy allows, for this call (never more: the policy's cap
   * protects the upstream). */
  maxAttempts?: number;
  /** `false`: never hedge this call, though the policy hedges. */
  hedge?: false;
}

/**
 * Per-call options for an SDK client wrapped by breakwater: pass as the request options
 * (`create(params, callOptions({ run, validate }))`), or merge into yours.
 */
export function callOptions(o: PerCall): {
  fetchOptions: Omit<RequestInit, "headers" | "body" | "signal" | "method">;
} {
  adapterOptions("callOptions", PER_CALL, o);
  return { fetchOptions: { [CALL]: o } as RequestInit };
}

const PER_CALL = {
  run: ADAPTER_SPEC.run,
  priority: opt.any<number>((x) => Number.isFinite(x), "a finite number"),
  validate: opt.any<OutputCheck>(
    (v) => typeof v === "function" || (v !== null && typeof v === "object"),
    "a Standard Schema or a function",
  ),
  effect: opt.oneOf(EFFECTS),
  reconcile: opt.fn<Reconcile>(),
  // The policy's own rules for a call's limits: checked once, here, as the call takes them.
  deadlineMs: CALL_SPEC.deadlineMs,
  attemptTimeoutMs: CALL_SPEC.attemptTimeoutMs,
  maxAttempts: CALL_SPEC.maxAttempts,
  hedge: CALL_SPEC.hedge,
};

/** An answer that was not 2xx, read: what the classifier reads, and what rebuilds it. */
class UpstreamAnswer extends HttpError {
  readonly text: string;
  readonly statusText: string;

  constructor(res: Response, text: string) {
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {}
    super(res.status, res.headers, body);
    this.text = text;
    this.statusText = res.statusText;
  }

  static async read(res: Response): Promise<UpstreamAnswer> {
    return new UpstreamAnswer(res, await res.text().catch(() => ""));
  }

  /** A 2xx answer whose body is an error, as the non-2xx answer it stands for: the status
   * its error says (a 429 for a rate limit, 503 for an overload, 500 when it says nothing
   * known), so every gate counts a failure, the policy retries what is transient, and the
   * SDK, handed it on a give-up, raises its own error of that class. */
  static inBody(res: Response, text: string, body: Record<string, unknown>): UpstreamAnswer {
    const as = new Response(null, {
      status: errorBodyStatus(body),
      statusText: "error in a 2xx body",
      headers: res.headers,
    });
    return new UpstreamAnswer(as, text);
  }
}

/** A stream event that is not JSON: a server failure to the classifier; not an event to
 * hand the SDK (its body errors instead). */
class MalformedEvent extends Error {
  readonly error = { type: "server_error", code: "malformed_event" };
  constructor() {
    super("a stream event that is not JSON");
  }
}

/** A provider's error event inside a 200 stream, with the event as it came. */
class InBandEvent extends Error {
  readonly raw: string;
  constructor(raw: string, cause: unknown) {
    super("an error event inside a 200 stream", { cause });
    this.raw = raw;
  }
}

/** Attaches the call's outcome to the headers an SDK builds its error from (the Response's
 * own Headers object, which it copies from what it is given), so `reasonOf`, `ledgerOf` and
 * `failureOf` work on the SDK's own error. */
function tagged(res: Response, from: unknown): Response {
  const ledger = ledgerOf(from);
  const reason = reasonOf(from);
  if (ledger && reason) tagError(res.headers, reason, ledger, failureOf(from), partialOf(from));
  return res;
}

function findCause<T>(error: unknown, C: abstract new (...a: never[]) => T): T | undefined {
  for (let e = error, i = 0; e && i < 8; e = (e as { cause?: unknown }).cause, i++)
    if (e instanceof C) return e;
  return undefined;
}

/** When the call ended on an answer from the server, that answer, for the SDK to raise its
 * own error from (RateLimitError, APIError from the event, ...). */
function answerOf(error: unknown, headers: Headers | undefined): Response | undefined {
  const answer = findCause(error, UpstreamAnswer);
  if (answer !== undefined) {
    const init = { status: answer.status, statusText: answer.statusText, headers: answer.headers };
    return tagged(new Response(answer.text, init), error);
  }
  const event = findCause(error, InBandEvent);
  if (event !== undefined && headers !== undefined)
    return tagged(new Response(event.raw, { status: 200, headers }), error);
  return undefined;
}

/** An answer breakwater gave up on, as the SDK is handed it: it says `x-should-retry:
 * false`, so no layer that reads the server's word (a Stainless SDK, the Agents SDK's
 * `providerSuggested`) sends it again. Not when the request is an attempt of another
 * call: that call owns the retry (rule 15). */
function final(c: FetchCall, answer: Response): Response {
  if (c.outer === undefined) answer.headers.set("x-should-retry", "false");
  return answer;
}

/** Bodies that can be sent again as they are. A stream body cannot: one attempt only. */
function replayable(body: unknown): boolean {
  return (
    body === undefined ||
    body === null ||
    typeof body === "string" ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    body instanceof Blob ||
    body instanceof FormData ||
    body instanceof URLSearchParams
  );
}

/** @internal A request as each attempt sends it. */
export interface Outgoing {
  readonly url: string;
  readonly method: string;
  readonly init: RequestInit & { [CALL]?: PerCall };
  readonly stream: boolean;
  /** The body as JSON: the object the SDK made it from, else parsed (once) when the checks,
   * the rate limiter or a stream need it. Read, never changed. */
  readonly json: unknown;
}

/** The request as each attempt sends it: the body prepared once, the stream flag read. */
function outgoing(
  input: RequestInfo | URL,
  init: RequestInit,
  dialect: Dialect | undefined,
  parse: boolean,
): Outgoing {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  let body = init.body;
  let stream = url.includes("alt=sse") && /[?&]alt=sse(?:&|$)/.test(url);
  let json: unknown;
  if (typeof body === "string" && body.startsWith("{")) {
    const given = givenJson(init, body) ?? sdkBody(body);
    // Only a body that says `"stream": true` is prepared; the rest go as sent.
    const streams = given !== undefined ? given.stream === true : saysStream(body);
    json = given ?? (streams || parse ? safeJson(body) : undefined);
    const parsed = json as Record<string, unknown> | undefined;
    stream ||= streams && parsed?.stream === true;
    const prepared = stream && parsed !== undefined ? dialect?.prepare?.(url, parsed) : undefined;
    if (prepared !== undefined) {
      body = withKeys(body, parsed!, prepared);
      json = prepared;
    }
  } else if (parse && typeof body === "string") json = safeJson(body);
  const method = (init.method ?? "GET").toUpperCase();
  return { url, method, init: body === init.body ? init : { ...init, body }, stream, json };
}

/** Sends one attempt of a request. */
type Send = (req: Outgoing, attempt: number, signal: AbortSignal) => Promise<Response>;

/** @internal One request under the policy: what its attempts send, what it carries into
 * the policy, and how its answers are read and checked. */
interface FetchCall {
  readonly policy: Policy;
  readonly outgoing: Outgoing;
  readonly callOptions: Pick<
    CallOptions,
    | "signal"
    | "run"
    | "cost"
    | "priority"
    | "model"
    | "provider"
    | "operation"
    | "seenAs"
    | "effect"
    | "attemptTimeoutMs"
    | "deadlineMs"
    | "maxAttempts"
    | "hedge"
  >;
  readonly reconcile: Reconcile | undefined;
  readonly send: Send;
  readonly dialect: Dialect | undefined;
  /** The dialect's marks, as tested (`marksOf`). */
  readonly marks: Marks;
  /** How a stream's reads go on unsplit once content flows (`tailOf`). */
  readonly tail: Tail | undefined;
  /** Whether a stream's last event ended its answer (`Dialect.finished`). */
  readonly finished: ((event: SseEvent) => boolean) | undefined;
  readonly checks: Checks;
  /** The checks' reading of a JSON answer: the fetch layer's own, made once, unless the
   * call has a `validate` of its own. */
  readonly reply: OutputOptions<Reply> | undefined;
  readonly continuation: boolean;
  /** The attempt of another policy this request is sent as (a wrapped client called inside
   * a chain, a pool or a user's `execute`): it is sent once, as that attempt (rule 15). */
  readonly outer: OuterAttempt | undefined;
  /** The ledger of a request sent as an outer attempt: what it spent goes to that attempt. */
  readonly ledger: Ledger | undefined;
  /** The run whose journal records this request's answer (and answers it on resume). */
  readonly journal: Run | undefined;
}

/** How each attempt goes out: the attempt header, the transport, and every answer's
 * rate-limit headers told to the limiter (rule 16). */
function sender(options: GuardedFetchOptions, p: Policy): Send {
  const send = wire(options);
  const limiter = p.options.limiter;
  const heard = (res: Response) => {
    hear(limiter, res.headers);
    return res;
  };
  return (req, attempt, signal) => send(req.url, req.init, attempt, signal).then(heard);
}

/** A connect timeout is kept by undici's connector: without the package, say so at once. */
function needsUndici(owner: string, connectTimeoutMs: number): void {
  if (!Number.isNaN(connectTimeoutMs) && !hasUndici())
    throw new ConfigError(
      owner,
      "connectTimeoutMs",
      connectTimeoutMs,
      "used with the undici package installed (npm install undici)",
    );
}

/** What `attemptFetch` takes. */
export interface AttemptFetchOptions {
  /** The policy whose calls send through it: its rate limiter hears every answer's
   * rate-limit headers. */
  policy?: Policy;
  /** The fetch to send with. Default: the global fetch (on undici's, when installed). */
  fetch?: typeof globalThis.fetch;
  /** Gives up a request whose TCP/TLS connection is not up within this many ms (needs the
   * `undici` package). Default: the fetch's own (10 s). */
  connectTimeoutMs?: number;
  /** The header that carries the attempt number (`x-stainless-retry-count` where the SDK
   * sends it). `false`: none. Default "x-retry-attempt". */
  attemptHeader?: string | false;
}

const ATTEMPT_FETCH = {
  policy: opt.any<Policy>(
    (x) => typeof (x as Policy | null)?.execute === "function",
    "a Policy (policy({ ... }))",
  ),
  fetch: opt.fn<typeof globalThis.fetch>(),
  connectTimeoutMs: FETCH_SPEC.connectTimeoutMs,
  attemptHeader: FETCH_SPEC.attemptHeader,
};

/**
 * The fetch to give an SDK whose calls breakwater retries above it, at the object level
 * (the AI SDK's middleware, LangChain's adapter): each request carries the attempt number
 * the adapter's policy is on, a connect timeout, and its rate-limit headers to the policy's
 * limiter. It retries nothing itself.
 *
 * @example
 * ```ts
 * const p = policy();
 * const openai = createOpenAI({ fetch: attemptFetch({ policy: p, connectTimeoutMs: 5_000 }) });
 * const model = wrapLanguageModel({ model: openai("gpt-4o-mini"), middleware: breakwaterMiddleware({ policy: p }) });
 * ```
 */
export function attemptFetch(options: AttemptFetchOptions = {}): typeof globalThis.fetch {
  const o = adapterOptions("attemptFetch", ATTEMPT_FETCH, options);
  needsUndici("attemptFetch", o.connectTimeoutMs);
  const send = wire(options);
  const limiter = options.policy?.options.limiter;
  const base = options.fetch ?? globalThis.fetch;
  return async (input, init = {}) => {
    // A Request object is sent as it is.
    if (typeof input === "object" && !(input instanceof URL)) return base(input, init);
    const url = typeof input === "string" ? input : input.href;
    const res = await send(url, init, currentAttempt());
    hear(limiter, res.headers);
    return res;
  };
}

/**
 * A fetch that runs every request through one policy: the building block of the SDK
 * adapters, and usable with any client that takes a `fetch` (with its own retries off).
 * An answer the policy gives up on is handed to the client as it came, so the client raises
 * its own error; a refusal before any answer (an open breaker, a spent run) is thrown, and
 * the client reports it as a connection error whose cause is the BreakwaterError. A stream
 * is retried until its first content event and then passed through untouched.
 */
export function guardedFetch(options: GuardedFetchOptions = {}): typeof globalThis.fetch {
  const layer = layerOf(options);
  const { contextTokens } = layer;
  const base = options.fetch ?? globalThis.fetch;
  // Not async: a call's promise is the policy's own, with no ticks added on the way out.
  const guarded = (input: RequestInfo | URL, init: RequestInit): Promise<Response> => {
    if (!replayable(init.body) || (typeof input === "object" && !(input instanceof URL)))
      return Promise.resolve(base(input, init)); // a body that cannot be sent twice, or a Request object
    const reading = layer.readingOf(String(input));
    const { dialect } = reading;
    const req = outgoing(input, init, dialect, layer.parse(reading));
    const raw = req.init.body;
    const refused =
      dialect && typeof raw === "string"
        ? checkRequest(dialect, req.url, raw, req.json, contextTokens)
        : undefined;
    if (refused !== undefined) return Promise.resolve(new FailedAnswer(refused)); // nothing sent, nothing spent
    return dispatched(callOf(layer, reading, req, req.init[CALL]));
  };
  const fetch: typeof globalThis.fetch = (input, init = {}) => {
    try {
      return guarded(input, init);
    } catch (error) {
      return Promise.reject(error); // what the checks before the policy threw, as a fetch's
    }
  };
  // What `audit` reads, and the adapters' marks copy: the attempts of the layer's policy.
  return markLayer(fetch, { owner: "guardedFetch", attempts: layer.policy.options.maxAttempts });
}

/** How a layer reads one dialect's answers, made once for all its requests in it. */
interface Reading {
  readonly dialect: Dialect | undefined;
  readonly marks: Marks;
  readonly tail: Tail | undefined;
  readonly finished: ((event: SseEvent) => boolean) | undefined;
  readonly reply: OutputOptions<Reply> | undefined;
}

/** One fetch layer, as made: its options checked, its policy, its sender and what reads
 * its answers, made once for all its requests. */
interface Layer {
  readonly options: GuardedFetchOptions;
  readonly policy: Policy;
  readonly contextTokens: number | undefined;
  /** Whether request bodies are read as JSON (for the dialect or the limiter). */
  readonly parse: (reading: Reading) => boolean;
  readonly send: Send;
  readonly checks: Checks;
  /** The reading of a request to `url`: the given dialect's, else the one its path names
   * (`sniffDialect`), else none. */
  readingOf(url: string): Reading;
  readonly continuation: boolean;
  /** The policy a request sent as another call's attempt runs under. */
  once(): Policy;
}

function readingsOf(given: Dialect | undefined, checks: Checks): (url: string) => Reading {
  const make = (d: Dialect | undefined): Reading => {
    const marks = marksOf(d);
    return {
      dialect: d,
      marks,
      tail: tailOf(d, marks),
      finished: d?.finished && ((e: SseEvent) => d.finished!(e.json, e)),
      reply: d && replyChecks(d, checks, replyJson),
    };
  };
  if (given !== undefined) {
    const fixed = make(given);
    return () => fixed;
  }
  const made = new Map<Dialect | undefined, Reading>();
  return (url) => {
    const d = sniffDialect(url);
    let r = made.get(d);
    if (r === undefined) made.set(d, (r = make(d)));
    return r;
  };
}

function layerOf(options: GuardedFetchOptions): Layer {
  const o = adapterOptions("guardedFetch", SPEC, options);
  needsUndici("guardedFetch", o.connectTimeoutMs);
  const p = asPolicy(options.policy);
  const checks: Checks = {
    truncation: o.truncation,
    fencedJson: o.fencedJson,
    validate: undefined,
  };
  wantAmbient();
  let bare: Policy | undefined;
  const limited = p.options.limiter !== undefined;
  return {
    options,
    policy: p,
    contextTokens: Number.isNaN(o.contextTokens) ? undefined : o.contextTokens,
    parse: (r) => r.dialect !== undefined || limited,
    send: sender(options, p),
    checks,
    readingOf: readingsOf(o.dialect, checks),
    continuation: o.continuation,
    // Inside another policy's attempt, a request is sent once and read as this layer reads
    // it (usage, in-band errors, checks): no retry, no gate of its own (rule 15).
    once: () =>
      (bare ??= policy({
        maxAttempts: 1,
        budget: false,
        limiter: false,
        clock: p.options.clock,
        ...(p.options.classify && { classify: p.options.classify }),
      })),
  };
}

/** One request under the layer: as a call of its own, or as the attempt of another
 * policy's call it is sent inside. */
function callOf(
  layer: Layer,
  reading: Reading,
  req: Outgoing,
  perCall: PerCall | undefined,
): FetchCall {
  const { checks, policy: p } = layer;
  const d = reading.dialect;
  const own = perCall?.validate === undefined ? checks : { ...checks, validate: perCall.validate };
  const outer = ambientAttempt();
  const run = runOf(layer.options, perCall?.run);
  const ledger = outer === undefined ? undefined : new Ledger(p.options.clock.now());
  return {
    policy: outer === undefined ? p : layer.once(),
    outgoing: req,
    callOptions:
      outer === undefined
        ? callOptionsOf(run, d, req, perCall, p)
        : asAttemptOf(outer, ledger!, d, req, perCall),
    send: outer === undefined ? layer.send : sendAs(outer, layer.send),
    outer,
    ledger,
    journal: run,
    dialect: d,
    marks: reading.marks,
    tail: reading.tail,
    finished: reading.finished,
    checks: own,
    reply: own === checks || !d ? reading.reply : replyChecks(d, own, replyJson),
    continuation: layer.continuation,
    reconcile: perCall?.reconcile ?? layer.options.reconcile,
  };
}

/** The call under the policy; with a journaled run, a call made before at this place is
 * answered from the journal, and one made now is recorded. */
function dispatched(call: FetchCall): Promise<Response> {
  const req = call.outgoing;
  const pending = slotFor(call.journal, req.method, req.url, req.init.body);
  if (pending === undefined) return req.stream ? streamed(call) : unary(call);
  return pending.then((slot) => {
    const replayed = slot?.replayed === true ? replay(slot.answer) : undefined;
    if (replayed !== undefined) return replayed;
    const record = slot?.replayed === false ? slot.record : undefined;
    return req.stream ? streamed(call, record) : unary(call, record);
  });
}

/** What sending a request again does: the dialect's reading, else by its method. */
function effectOf(d: Dialect | undefined, req: Outgoing): Effect {
  if (d?.effect !== undefined) return d.effect(req.method, req.url, req.json);
  return req.method === "GET" || req.method === "HEAD" ? "read" : "idempotent";
}

/** What became of a request whose outcome is unknown, asked of `reconcile`: its answer as
 * a Response the SDK reads, or undefined (the error goes on). */
async function reconciled(c: FetchCall, error: unknown): Promise<Response | undefined> {
  if (c.reconcile === undefined || reasonOf(error) !== "outcome-unknown") return undefined;
  const { url, method, json } = c.outgoing;
  const value = await c.reconcile({ url, method, body: json, error });
  if (value === undefined) return undefined;
  return new Response(JSON.stringify(value), {
    status: 200,
    headers: { "content-type": "application/json" },
  });
}

/** What a call carries into the policy. Built of values checked when the fetch layer was
 * made, so the policy does not check them again on every call, unless a value comes from
 * elsewhere unchecked: a per-call entry, a run, or a reading that is not well formed. */
function callOptionsOf(
  run: Run | undefined,
  d: Dialect | undefined,
  req: Outgoing,
  perCall: PerCall | undefined,
  p: Policy,
): FetchCall["callOptions"] {
  const out: FetchCall["callOptions"] & { [CHECKED]?: true } = labels(d, req);
  const { signal, body } = req.init;
  if (signal) out.signal = signal;
  const timeoutMs = attemptTimeout(perCall, p.options.attemptTimeoutMs);
  if (timeoutMs !== undefined) out.attemptTimeoutMs = timeoutMs;
  const limited = p.options.limiter !== undefined;
  if (run !== undefined) out.run = run;
  if (perCall !== undefined) ownLimits(out, perCall);
  out.effect = perCall?.effect ?? effectOf(d, req);
  if (limited && typeof body === "string") out.cost = estimateCost(d, body, req.json);
  if (perCall === undefined && run === undefined && wellFormed(out)) out[CHECKED] = true;
  return out;
}

/** A request sent as attempt `outer` of another policy's call: one attempt, cut when that
 * attempt is, its spending recorded into `ledger` (and told to `outer` when it ends); what
 * sending it again would do is told to the outer call, which owns the retry (rule 20). */
function asAttemptOf(
  outer: OuterAttempt,
  ledger: Ledger,
  d: Dialect | undefined,
  req: Outgoing,
  perCall: PerCall | undefined,
): FetchCall["callOptions"] & { ledger: Ledger } {
  const out: FetchCall["callOptions"] & { ledger: Ledger } = { ...labels(d, req), ledger };
  const own = req.init.signal;
  out.signal = own ? AbortSignal.any([own, outer.signal]) : outer.signal;
  const timeoutMs = attemptTimeout(perCall, Number.POSITIVE_INFINITY);
  if (timeoutMs !== undefined) out.attemptTimeoutMs = timeoutMs;
  out.effect = perCall?.effect ?? effectOf(d, req);
  outer.sends(out.effect);
  return out;
}

/** Sends as attempt `outer`: its number on the request, the answer's headers to its
 * policy's limiter too. */
function sendAs(outer: OuterAttempt, send: Send): Send {
  return (req, _attempt, signal) =>
    send(req, outer.attempt, signal).then((res) => {
      hear(outer.limiter, res.headers);
      return res;
    });
}

/** A call's own limits (`callOptions`): its priority, deadline, attempts, hedging. */
function ownLimits(out: FetchCall["callOptions"], perCall: PerCall): void {
  if (perCall.priority !== undefined) out.priority = perCall.priority;
  if (perCall.deadlineMs !== undefined) out.deadlineMs = perCall.deadlineMs;
  if (perCall.maxAttempts !== undefined) out.maxAttempts = perCall.maxAttempts;
  if (perCall.hedge === false) out.hedge = false;
}

/** One attempt's timeout for a request: the call's own (`callOptions`), else the one the
 * user gave the SDK (the request's, else the client's), else the policy's, which the
 * SDK's default (10 minutes: one attempt's, as in the SDK) caps. */
function attemptTimeout(perCall: PerCall | undefined, policyMs: number): number | undefined {
  if (perCall?.attemptTimeoutMs !== undefined) return perCall.attemptTimeoutMs;
  const sdk = sdkTimeout();
  if (sdk === undefined) return undefined;
  if (sdk.given !== undefined) return sdk.given;
  return policyMs > sdk.cap ? sdk.cap : undefined;
}

/** The policy's own rules (`CALL_SPEC`) for what a request's own values put into its call
 * options: its signal, and a custom dialect's readings (model, provider, operation, effect). */
const OWN_VALUES = (["signal", "model", "provider", "operation", "effect"] as const).map(
  (key) => [key, CALL_SPEC[key]] as const,
);
const OWN = new Validator("guardedFetch");

/** Whether those values are what the policy's checks allow: then they need no check again.
 * A run is checked by the policy each call (a factory may hand anything). */
function wellFormed(o: FetchCall["callOptions"]): boolean {
  try {
    for (const [key, rule] of OWN_VALUES) rule(OWN, key, o[key]);
    return true;
  } catch {
    return false; // the policy checks the call and names what is wrong
  }
}

/** What a request is, as telemetry names it: the model it asks for, who serves it, the
 * operation; and, inside an SDK method call, the error the SDK will hand its caller. */
function labels(d: Dialect | undefined, req: Outgoing): Partial<CallOptions> {
  const out: Partial<CallOptions> = {};
  const model = requestModel(d, req.url, req.json);
  if (model !== undefined) out.model = model;
  if (d?.provider !== undefined) out.provider = d.provider;
  const operation = d?.operation?.(req.url);
  if (operation !== undefined) out.operation = operation;
  const seen = seenAs();
  if (seen !== undefined) out.seenAs = seen;
  return out;
}

/** Records a call's answer in its run's journal. */
type Recorder = (answer: unknown) => Promise<void>;

/** Keeps a text answer (JSON, text) in the journal; a binary one is made again on resume. */
async function keep(res: Response, record: Recorder | undefined): Promise<void> {
  if (record === undefined || !/json|text/.test(res.headers.get("content-type") ?? "")) return;
  await record(recordOf(res, await res.clone().text()));
}

/** What a JSON attempt resolves with: the answer as the SDK reads it, and what was read of it. */
interface Reply {
  readonly res: Response;
  readonly usage?: Partial<Usage> | undefined;
  readonly json?: unknown;
}

const replyUsage = (r: unknown) => (r as Reply).usage;
const replyJson = (r: Reply) => r.json;

/** A request sent as another call's attempt tells that attempt what it spent. */
function told(c: FetchCall): void {
  if (c.outer !== undefined && c.ledger !== undefined) c.outer.spend(c.ledger.billed);
}

/** A JSON request: the policy retries it until an answer counts; the SDK reads the answer
 * (or raises its own error from the one the policy gave up on). */
async function unary(c: FetchCall, record?: Recorder): Promise<Response> {
  let last: Headers | undefined;
  const { dialect, outgoing: req } = c;
  // The call's options are its own object: the reading of the answer is added to it.
  const options: ExecuteOptions<Reply> = c.callOptions;
  options.usage = replyUsage;
  if (c.reply !== undefined) Object.assign(options, c.reply);
  try {
    const done = await c.policy.execute(async (ctx): Promise<Reply> => {
      const res = await c.send(req, ctx.attempt, ctx.signal);
      if (!res.ok) throw await UpstreamAnswer.read(res);
      ctx.answering(); // a hedge race is decided on the headers (rule 21)
      last = res.headers;
      // (An answer read whole already has a body, and asking for it would build one.)
      const bodiless = !(res instanceof ReadResponse) && res.body === null;
      if (!dialect || !res.headers.get("content-type")?.includes("json") || bodiless)
        return { res };
      // Read inside the attempt: a body cut short is retried. The SDK is handed the value
      // parsed here (it would parse the same text).
      const text = await res.text();
      const json = safeJson(text);
      const error = errorBodyOf(json);
      if (error !== undefined) throw UpstreamAnswer.inBody(res, text, error);
      const model = answeringModel(dialect, json);
      if (model !== undefined) ctx.answeredBy(model);
      return { res: new ReadResponse(text, res, json), usage: dialect.usage?.(json), json };
    }, options);
    told(c);
    if (record !== undefined) await keep(done.res, record);
    return done.res;
  } catch (error) {
    told(c);
    const settled = await reconciled(c, error);
    if (settled !== undefined) return settled;
    gaveUp(error);
    const answer = answerOf(error, undefined);
    if (answer !== undefined) return final(c, answer);
    // A bad answer (truncated, invalid): the SDK's read of it rejects with the OutputError.
    if (findCause(error, OutputError) !== undefined)
      return tagged(new FailedAnswer(error, last), error);
    throw error;
  }
}

/** Opens one attempt's events: of the request as it is, or (a continuation) with `body`. */
function opener(c: FetchCall, body?: string, answered?: (res: Response) => void) {
  const req =
    body === undefined ? c.outgoing : { ...c.outgoing, init: { ...c.outgoing.init, body } };
  // A continuation's events are each shaped to go on with the first answer: none is a run.
  const tail = body === undefined ? c.tail : undefined;
  return async (ctx: AttemptContext): Promise<AsyncIterable<SseChunk>> => {
    const res = await c.send(req, ctx.attempt, ctx.signal);
    if (!res.ok) throw await UpstreamAnswer.read(res);
    answered?.(res);
    return sseEvents(res.body ?? emptyBody(), modelLook(c.dialect, ctx), tail, c.finished);
  };
}

/** What reads the first few events for the model that answers them; the rest are read
 * by nothing of it. */
function modelLook(dialect: Dialect | undefined, ctx: AttemptContext) {
  let looking = 4;
  return (e: SseEvent): boolean => {
    const model = answeringModel(dialect, e.json);
    if (model !== undefined) ctx.answeredBy(model);
    return model !== undefined || --looking === 0;
  };
}

/** Whether a chunk holds content: a run, when one of its events does (asked after the first
 * content only for the idle timer). */
function holdsContent(dialect: Dialect | undefined, e: SseChunk): boolean {
  if (dialect === undefined) return true;
  if (!(e instanceof SseRun)) return dialect.isContent(e.json, e);
  return e.events().some((one) => dialect.isContent(one.json, one));
}

/** The stream call under the policy: events read for content, usage, in-band errors and
 * the answer so far; with `continuation`, a break goes on from where it broke. */
function openEvents(c: FetchCall, answered: (res: Response) => void) {
  const { dialect } = c;
  const read = markedReads(dialect, c.marks);
  const raw = c.outgoing.init.body;
  const continuing =
    c.continuation && dialect?.continueWith !== undefined && typeof raw === "string";
  return c.policy.stream<SseChunk>(opener(c, undefined, answered), {
    ...c.callOptions,
    isContent: (e) => holdsContent(dialect, e),
    ...(dialect?.usage && {
      usage: read.usage,
    }),
    ...(dialect?.answer && {
      answer: (chunks: readonly SseChunk[]) => dialect.answer!(jsonsOf(chunks)),
    }),
    ...(dialect && streamChecks(dialect, c.checks, jsonsOf)),
    // `partialOf(error).chunks` and the outcome's count are events, whatever the reads were.
    [SHOWN]: eventsOf,
    inspect: (e) => {
      // Data that is not JSON: the provider's answer broke (a proxy's page, a broken
      // encoder), a server failure, not the SDK's SyntaxError on a stream counted a success.
      if (dialect && e.malformed) return new MalformedEvent();
      const error = read.inBand(e);
      return error === undefined ? undefined : new InBandEvent(e.raw, error);
    },
    ...(continuing && {
      continueFrom: continueEvents(c.outgoing.url, raw as string, dialect!, (body) =>
        opener(c, body),
      ),
    }),
  });
}

/** The JSON of every event in `chunks`, in order. */
const jsonsOf = (chunks: readonly SseChunk[]) => eventsOf(chunks).map((e) => e.json);

/** A stream request: retried until its first content event, then passed through. */
async function streamed(c: FetchCall, record?: Recorder): Promise<Response> {
  let current: Response | undefined;
  const events = openEvents(c, (res) => {
    current = res;
  });
  if (c.outer !== undefined) {
    const tell = () => told(c);
    events.done.then(tell, tell);
  }
  // `guardedStream(sdkStream)` finds the stream by the SDK's request signal.
  const signal = c.callOptions.signal;
  if (signal !== undefined) streamBehind(signal, events as GuardedStream<unknown>);
  let first: IteratorResult<SseChunk>;
  try {
    first = await events.next(); // the retries happen here, before the SDK sees a byte
  } catch (error) {
    gaveUp(error);
    const answer = answerOf(error, current?.headers);
    if (answer !== undefined) return final(c, answer);
    throw error;
  }
  const res = current!;
  const init = { status: res.status, statusText: res.statusText, headers: res.headers };
  // A failure after content is told on this response's headers, which the SDK hands its error.
  // A stream read to its end is recorded as the events the SDK read.
  const mark = c.dialect?.endMark;
  const ends: Ends = {
    ...(mark !== undefined && { last: endsWithData(mark) }),
    // An error event after content reaches the SDK as the event it was (the SDK raises its
    // own error); any other failure errors the body.
    failed: async (error) => {
      tagged(outer, error);
      if (c.dialect?.handsOnInBand === false) return undefined;
      // Only an event can follow events: a continuation's refusal (a whole HTTP answer of
      // its own) is no event, so the body fails with it instead.
      return findCause(error, InBandEvent)?.raw;
    },
    // Only a stream its consumer read to the end is an answer to record: one stopped
    // another way (`guardedStream(s).return()`) ends too, but is no whole answer.
    ...(record && {
      done: async (text: string) => {
        const outcome = await events.done.catch(() => undefined);
        if (outcome !== undefined && !outcome.stopped) await record(recordOf(res, text));
      },
    }),
  };
  const outer: Response = new Response(passThrough(events, first, ends), init);
  return outer;
}

async function* emptyBody(): AsyncGenerator<Uint8Array> {}
