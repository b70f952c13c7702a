import {
  type CallOptions,
  ConfigError,
  failureOf,
  type GuardedStream,
  HttpError,
  ledgerOf,
  type OutputCheck,
  OutputError,
  type PartialAnswer,
  type Policy,
  partialOf,
  type Run,
  reasonOf,
  tagError,
  type Usage,
} from "../index.ts";
import {
  type CheckDialect,
  type Checks,
  checkRequest,
  estimateCost,
  FailedAnswer,
  replyChecks,
  streamChecks,
} from "./checks.ts";
import { continuation, type Lead } from "./continuation.ts";
import { type AdapterOptions, asPolicy, runFor } from "./shared.ts";
import { type SseEvent, sseEvents } from "./sse.ts";

/** How to read one provider's answers. Every function is handed parsed JSON (undefined when
 * the body or event is not JSON). */
export interface Dialect extends CheckDialect {
  /** Usage from a JSON answer or one stream event. */
  usage?(json: unknown): Partial<Usage> | undefined;
  /** A stream event that carries content (text, a tool call, reasoning): once one reached
   * the SDK, nothing is retried. */
  isContent(json: unknown, event: SseEvent): boolean;
  /** The provider's error inside a 200 stream, as an error to classify. */
  inBand?(json: unknown, event: SseEvent): unknown;
  /** Changes a streaming request's JSON body before it is sent (the usage chunk of an OpenAI
   * stream). */
  prepare?(url: string, body: Record<string, unknown>): Record<string, unknown> | undefined;
  /** Continuation: the request body that asks the model to go on from `prefix`, or
   * undefined where the provider cannot. */
  continueWith?(
    url: string,
    body: Record<string, unknown>,
    prefix: string,
  ): Record<string, unknown> | undefined;
  /** A continuation's event as the SDK should read it, going on with the first answer:
   * undefined drops it (the second answer's preamble). `lead` holds the whitespace the
   * prefix was trimmed of, to take off the continuation's first text. */
  resume?(json: unknown, event: SseEvent, lead: Lead): SseEvent | undefined;
  /** The answer so far, from the parsed events a broken stream delivered. */
  answer?(events: readonly unknown[]): PartialAnswer;
  /** Cheap tests on an event's raw text: only events that pass are parsed for usage or for
   * an error (most chunks are neither). Default: every event. */
  marks?: { usage?: RegExp; error?: RegExp };
}

/** What `guardedFetch` takes: the policy and run every request draws on, the transport (fetch, connect timeout), the attempt header, the dialect that reads the provider's answers, and the output checks. */
export interface GuardedFetchOptions extends AdapterOptions {
  /** The fetch each attempt calls. Default: the global fetch. */
  fetch?: typeof globalThis.fetch;
  /** How to read the provider's answers. */
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
  /** The model's context window in tokens: a request whose output allowance leaves no room
   * for its prompt fails before it is sent. @default unchecked */
  contextTokens?: number;
}

/** What one call carries to the fetch layer, through the SDK's `fetchOptions`. */
const CALL = Symbol.for("breakwater.call");

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
}

/**
 * Per-call options for an SDK client wrapped by breakwater: pass as the request options
 * (`create(params, callOptions({ run, validate }))`), or merge into yours.
 */
export function callOptions(o: PerCall): {
  fetchOptions: Omit<RequestInit, "headers" | "body" | "signal" | "method">;
} {
  return { fetchOptions: { [CALL]: o } as RequestInit };
}

const OWNER = "guardedFetch";

function check(o: GuardedFetchOptions): void {
  if (o.fetch !== undefined && typeof o.fetch !== "function")
    throw new ConfigError(OWNER, "fetch", o.fetch, "a fetch function");
  const ms = o.connectTimeoutMs;
  if (ms !== undefined && !(Number.isInteger(ms) && ms > 0 && ms <= 2_147_483_647))
    throw new ConfigError(OWNER, "connectTimeoutMs", ms, "a whole number of milliseconds > 0");
  if (ms !== undefined && !hasUndici())
    throw new ConfigError(
      OWNER,
      "connectTimeoutMs",
      ms,
      "used with the undici package installed (npm install undici)",
    );
  if (o.truncation !== undefined && o.truncation !== "error" && o.truncation !== "allow")
    throw new ConfigError(OWNER, "truncation", o.truncation, '"error" or "allow"');
  const ct = o.contextTokens;
  if (ct !== undefined && !(Number.isInteger(ct) && ct > 0))
    throw new ConfigError(OWNER, "contextTokens", ct, "a whole number of tokens > 0");
  if (o.continuation !== undefined && typeof o.continuation !== "boolean")
    throw new ConfigError(OWNER, "continuation", o.continuation, "true or false");
  const h = o.attemptHeader;
  if (h !== undefined && h !== false && !(typeof h === "string" && /^[A-Za-z0-9-]+$/.test(h)))
    throw new ConfigError(OWNER, "attemptHeader", h, "a header name or false");
}

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

const STREAM_FLAG = /"stream"\s*:\s*true/;

/** @internal A request as each attempt sends it. */
export interface Outgoing {
  url: string;
  init: RequestInit & { [CALL]?: PerCall };
  stream: boolean;
  /** The body as the caller wrote it, parsed, when it had to be (a stream's). */
  json?: unknown;
}

/** The request as each attempt sends it: the body prepared once, the stream flag read. */
function outgoing(
  input: RequestInfo | URL,
  init: RequestInit,
  dialect: Dialect | undefined,
): Outgoing {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  let body = init.body;
  let stream = /[?&]alt=sse(?:&|$)/.test(url);
  let json: Record<string, unknown> | undefined;
  // Only a body that says `"stream": true` is parsed (and prepared): the rest go as sent.
  if (typeof body === "string" && body.startsWith("{") && STREAM_FLAG.test(body)) {
    try {
      json = JSON.parse(body) as Record<string, unknown>;
      stream ||= json.stream === true;
      const prepared = dialect?.prepare?.(url, json);
      if (prepared !== undefined) body = JSON.stringify(prepared);
    } catch {}
  }
  return { url, init: { ...init, body }, stream, ...(json !== undefined && { json }) };
}

/** Whether the undici package can be loaded (checked without loading it). */
function hasUndici(): boolean {
  try {
    import.meta.resolve("undici");
    return true;
  } catch {
    return false;
  }
}

/**
 * The transport under the default fetch: undici's fetch on an Agent whose header and body
 * timeouts are off, so the policy's deadline and attempt timeouts govern a slow answer
 * (Node's own fetch ends any call at 300 s), and, given `connectMs`, a connect timeout kept
 * by our own timer (undici's checks on a one-second tick: 200 ms would fire after a second).
 */
async function undiciTransport(
  connectMs: number | undefined,
): Promise<{ fetch: typeof globalThis.fetch; dispatcher: unknown }> {
  const undici = await import("undici");
  let connect: import("undici").buildConnector.connector | undefined;
  if (connectMs !== undefined) {
    const base = undici.buildConnector({ timeout: 0 });
    connect = (opts, callback) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        socket?.destroy();
        callback(
          new undici.errors.ConnectTimeoutError(`connect timed out after ${connectMs} ms`),
          null,
        );
      }, connectMs);
      // undici's connector returns the socket it opens, though its type says void.
      const socket = base(opts, (error, connected) => {
        clearTimeout(timer);
        if (settled) return void connected?.destroy();
        settled = true;
        if (error) callback(error, null);
        else callback(null, connected!);
      }) as unknown as { destroy(): void } | undefined;
    };
  }
  return {
    fetch: undici.fetch as unknown as typeof globalThis.fetch,
    dispatcher: new undici.Agent({
      headersTimeout: 0,
      bodyTimeout: 0,
      ...(connect && { connect }),
    }),
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
  check(options);
  const p = asPolicy(options.policy);
  const own = options.fetch !== undefined && options.fetch !== globalThis.fetch; // yours, as it is
  const base = options.fetch ?? globalThis.fetch;
  const dialect = options.dialect;
  const header = options.attemptHeader ?? "x-retry-attempt";
  const connectMs = options.connectTimeoutMs;
  const limiter = p.options.limiter;
  // undici is an optional peer: with it, the default transport has no 300 s limit.
  const transport =
    (!own || connectMs !== undefined) && hasUndici() ? undiciTransport(connectMs) : undefined;

  const send = async (req: Outgoing, attempt: number, signal: AbortSignal): Promise<Response> => {
    const headers = new Headers(req.init.headers);
    if (headers.has("x-stainless-retry-count"))
      headers.set("x-stainless-retry-count", String(attempt - 1));
    else if (header !== false) headers.set(header, String(attempt));
    const init = { ...req.init, headers, signal };
    let res: Response;
    if (transport === undefined) res = await base(req.url, init);
    else {
      const t = await transport;
      res = await (own ? base : t.fetch)(req.url, {
        ...init,
        dispatcher: t.dispatcher,
      } as RequestInit);
    }
    // Every answer, errors too, tells the limiter where the limits stand (rule 16); a
    // limiter that throws does not cost the answer.
    try {
      limiter?.observeHeaders(res.headers);
    } catch {}
    return res;
  };

  return async (input, init = {}) => {
    if (!replayable(init.body) || (typeof input === "object" && !(input instanceof URL)))
      return base(input, init); // a body that cannot be sent twice, or a Request object
    const req = outgoing(input, init, dialect);
    const own = req.init[CALL];
    const raw = req.init.body;
    // Parsed at most once, for the checks and the limiter's estimate (a stream's already was).
    const json =
      typeof raw === "string" && (dialect !== undefined || limiter !== undefined)
        ? (req.json ?? safeJson(raw))
        : undefined;
    const call: Call = {
      ...(init.signal && { signal: init.signal }),
      ...runFor(options, own?.run),
      ...(own?.priority !== undefined && { priority: own.priority }),
      ...(limiter !== undefined &&
        typeof raw === "string" && { cost: estimateCost(dialect, raw, json) }),
    };
    const refused =
      dialect && typeof raw === "string"
        ? checkRequest(dialect, req.url, raw, json, options.contextTokens)
        : undefined;
    if (refused !== undefined) return new FailedAnswer(refused); // nothing sent, nothing spent
    const checks = { truncation: options.truncation ?? "error", validate: own?.validate } as const;
    return req.stream
      ? streamed(p, req, call, send, dialect, checks, options.continuation === true)
      : unary(p, req, call, send, dialect, checks);
  };
}

/** @internal Sends one attempt of a request. */
export type Send = (req: Outgoing, attempt: number, signal: AbortSignal) => Promise<Response>;
/** @internal The call options a request carries into the policy. */
export type Call = Pick<CallOptions, "signal" | "run" | "cost" | "priority">;

const MAX_USAGE_BODY = 1 << 20;

async function unary(
  p: Policy,
  req: Outgoing,
  call: Call,
  send: Send,
  dialect: Dialect | undefined,
  checks: Checks,
): Promise<Response> {
  let last: Headers | undefined;
  try {
    const done = await p.execute(
      async (ctx): Promise<{ res: Response; usage?: Partial<Usage>; json?: unknown }> => {
        const res = await send(req, ctx.attempt, ctx.signal);
        if (!res.ok) throw await UpstreamAnswer.read(res);
        last = res.headers;
        if (!dialect || !res.headers.get("content-type")?.includes("json") || res.body === null)
          return { res };
        const text = await res.text(); // read inside the attempt: a body cut short is retried
        const json = text.length <= MAX_USAGE_BODY ? safeJson(text) : undefined;
        const init = { status: res.status, statusText: res.statusText, headers: res.headers };
        return { res: new ReadResponse(text, init, json), usage: dialect.usage?.(json), json };
      },
      {
        ...call,
        usage: (r) => (r as { usage?: Partial<Usage> }).usage,
        ...(dialect && replyChecks(dialect, checks, (r: { json?: unknown }) => r.json)),
      },
    );
    return done.res;
  } catch (error) {
    const answer = answerOf(error, undefined);
    if (answer !== undefined) return answer;
    // A bad answer (truncated, invalid): the SDK's read of it rejects with the OutputError.
    if (findCause(error, OutputError) !== undefined)
      return tagged(new FailedAnswer(error, last), error);
    throw error;
  }
}

/** A JSON answer already read and parsed for its usage: the SDK's `json()` gets the parsed
 * value instead of parsing the same text again. */
class ReadResponse extends Response {
  readonly #json: unknown;
  constructor(text: string, init: ResponseInit, json: unknown) {
    super(text, init);
    this.#json = json;
  }
  override json(): Promise<any> {
    return this.#json === undefined || this.bodyUsed ? super.json() : Promise.resolve(this.#json);
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** One stream call under the policy: events read for content, usage, in-band errors and
 * the answer so far. `extra` joins it to a call already under way (a continuation). */
export function openEvents(
  p: Policy,
  req: Outgoing,
  call: Call & Partial<Pick<CallOptions, "ledger" | "deadlineAt" | "maxAttempts">>,
  send: Send,
  dialect: Dialect | undefined,
  answered: (res: Response) => void,
  checks?: Checks,
): GuardedStream<SseEvent> {
  const usageMark = dialect?.marks?.usage;
  const errorMark = dialect?.marks?.error;
  return p.stream<SseEvent>(
    async (ctx) => {
      const res = await send(req, ctx.attempt, ctx.signal);
      if (!res.ok) throw await UpstreamAnswer.read(res);
      answered(res);
      return sseEvents(res.body ?? emptyBody());
    },
    {
      ...call,
      isContent: (e) => dialect?.isContent(e.json, e) ?? true,
      ...(dialect?.usage && {
        usage: (e: SseEvent) =>
          usageMark?.test(e.raw) === false ? undefined : dialect.usage!(e.json),
      }),
      ...(dialect?.answer && {
        answer: (events: readonly SseEvent[]) => dialect.answer!(events.map((e) => e.json)),
      }),
      ...(dialect && checks && streamChecks(dialect, checks, (e: SseEvent) => e.json)),
      inspect: (e) => {
        if (errorMark?.test(e.raw) === false) return undefined;
        const error = dialect?.inBand?.(e.json, e);
        return error === undefined ? undefined : new InBandEvent(e.raw, error);
      },
    },
  );
}

async function streamed(
  p: Policy,
  req: Outgoing,
  call: Call,
  send: Send,
  dialect: Dialect | undefined,
  checks: Checks,
  continuing: boolean,
): Promise<Response> {
  let current: Response | undefined;
  const deadlineAt = p.options.clock.now() + p.options.deadlineMs;
  const events = openEvents(
    p,
    req,
    call,
    send,
    dialect,
    (res) => {
      current = res;
    },
    checks,
  );
  let first: IteratorResult<SseEvent>;
  try {
    first = await events.next(); // the retries happen here, before the SDK sees a byte
  } catch (error) {
    const answer = answerOf(error, current?.headers);
    if (answer !== undefined) return answer;
    throw error;
  }
  const res = current!;
  const init = { status: res.status, statusText: res.statusText, headers: res.headers };
  const next =
    continuing && dialect?.continueWith
      ? continuation({ p, req, call, send, dialect, ledger: events.ledger, deadlineAt })
      : undefined;
  // A failure after content is told on this response's headers, which the SDK hands its error.
  const outer: Response = new Response(
    passThrough(events, first, res.headers, (error) => tagged(outer, error), next),
    init,
  );
  return outer;
}

async function* emptyBody(): AsyncGenerator<Uint8Array> {}

/** @internal What the body reads from: a stream call, or a continuation of one. */
export type Events = AsyncIterator<SseEvent> & { return(): Promise<unknown> };

/** The events as bytes, verbatim. An error event after content reaches the SDK as the
 * event it was (the SDK raises its own error); any other failure errors the body. */
function passThrough(
  source: Events,
  first: IteratorResult<SseEvent>,
  headers: Headers,
  failed: (error: unknown) => void,
  resume?: (error: unknown) => Promise<Events | undefined>,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let events = source;
  let pending: IteratorResult<SseEvent> | undefined = first;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const r = pending ?? (await events.next());
        pending = undefined;
        if (r.done) controller.close();
        else controller.enqueue(encoder.encode(r.value.raw));
      } catch (error) {
        // An opt-in continuation goes on from where the answer broke, in the same body.
        const next = await resume?.(error).catch(() => undefined);
        if (next !== undefined) {
          events = next;
          return;
        }
        failed(error);
        const answer = answerOf(error, headers);
        if (answer?.body) {
          controller.enqueue(encoder.encode(await answer.text()));
          controller.close();
        } else controller.error(error);
      }
    },
    async cancel() {
      await events.return();
    },
  });
}
