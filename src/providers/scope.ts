import { AsyncLocalStorage } from "node:async_hooks";
import {
  ConfigError,
  failureOf,
  isBreakwaterError,
  ledgerOf,
  partialOf,
  reasonOf,
} from "../index.ts";
import { tagError } from "../internal.ts";

/** One SDK method call: the last give-up of the requests it sent through the fetch layer,
 * and who waits to hear the error the SDK rejects with. */
export interface Scope {
  gaveUp: unknown;
  seen: ((error: unknown) => void)[] | undefined;
  /** The method call has settled: with `error` (undefined when it resolved). */
  settled: boolean;
  error: unknown;
  /** The last JSON body the SDK made in this call: its text, and the object it made it of. */
  built: { readonly text: string; readonly body: Record<string, unknown> } | undefined;
  /** The SDK's own timeout for the request, taken over as its attempt timeout. */
  timeout: SdkTimeout | undefined;
}

/** An SDK's timeout for one request: one attempt's, in the SDK as in breakwater. `given`
 * was set by the user (on the request, else the client) and replaces the policy's
 * `attemptTimeoutMs`; the SDK's default only caps it. */
export interface SdkTimeout {
  readonly given: number | undefined;
  readonly cap: number;
}

/** The error the SDK method now running will reject with (undefined when it resolves),
 * as a thenable, or undefined outside an SDK method call: what telemetry names a give-up
 * by. Only a give-up asks for it, so nothing waits on the scope until `then` is called:
 * a call that succeeds makes no promise for it. */
export function seenAs(): PromiseLike<unknown> | undefined {
  const scope = scopes.getStore();
  return scope === undefined ? undefined : new Seen(scope);
}

class Seen implements PromiseLike<unknown> {
  readonly #scope: Scope;
  constructor(scope: Scope) {
    this.#scope = scope;
  }
  // biome-ignore lint/suspicious/noThenProperty: a thenable is what this is
  then<A = unknown, B = never>(
    ok?: ((error: unknown) => A | PromiseLike<A>) | null,
    failed?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): PromiseLike<A | B> {
    const scope = this.#scope;
    const p = scope.settled
      ? Promise.resolve(scope.error)
      : new Promise<unknown>((resolve) => (scope.seen ??= []).push(resolve));
    return p.then(ok, failed);
  }
}

function settle(scope: Scope, error: unknown): void {
  scope.settled = true;
  scope.error = error;
  const seen = scope.seen;
  scope.seen = undefined;
  if (seen !== undefined) for (const resolve of seen) resolve(error);
}

const scopes = new AsyncLocalStorage<Scope>();

/** The fetch layer gave up on a request: the SDK method it belongs to will reject, with an
 * error of its own the outcome may not reach (it rebuilds errors from the body, or turns a
 * rejected fetch into its own timeout or abort class). */
export function gaveUp(error: unknown): void {
  const scope = scopes.getStore();
  if (scope !== undefined) scope.gaveUp = error;
}

/** `error`, given the outcome of the scope's last give-up when it carries none of its own
 * (`reasonOf`, `ledgerOf`, `failureOf`, `partialOf` then read it on the SDK's own class). */
function carry(scope: Scope, error: unknown): void {
  const from = scope.gaveUp;
  if (from === undefined || reasonOf(error) !== undefined) return;
  const reason = reasonOf(from);
  const ledger = ledgerOf(from);
  if (reason !== undefined && ledger !== undefined)
    tagError(error, reason, ledger, failureOf(from), partialOf(from));
}

/** A BreakwaterError the Stainless SDKs wrapped as their `APIConnectionError` (they wrap
 * whatever their fetch throws, saying "Connection error." of a request breakwater refused
 * before sending): the refusal itself, so breakwater's own decisions arrive as its one class
 * through every adapter. Their timeout subclass is their word for a timeout, kept for one
 * (the deadline, every attempt timed out); a refusal that only mentions one in its cause
 * (a breaker open after a timed-out attempt: the SDK reads "timed out" in it) is handed
 * back as itself. */
function ownOf(error: unknown, scope: Scope): unknown {
  if (!(error instanceof Error)) return error;
  const name = error.constructor.name;
  if (name !== "APIConnectionError" && name !== "APIConnectionTimeoutError") return error;
  // anthropic's timeout keeps no cause: the give-up the fetch layer told the scope is it.
  const cause = error.cause ?? scope.gaveUp;
  if (!isBreakwaterError(cause)) return error;
  if (name === "APIConnectionTimeoutError" && TIMEOUTS.has(cause.reason)) return error;
  return cause;
}

/** The reasons a Stainless SDK's timeout error stands for (a request that timed out after
 * it may have arrived, not sent again, is one). */
const TIMEOUTS: ReadonlySet<string> = new Set([
  "deadline",
  "attempt-timeout",
  "run-deadline",
  "outcome-unknown",
]);

/**
 * Runs one SDK method call in a scope of its own, so the error it rejects with tells how
 * breakwater ended it, whatever class the SDK gives it (rule 8). A method that returns no
 * promise is left as it is.
 */
export function scoped<T>(call: (scope: Scope) => T): T {
  const scope: Scope = {
    gaveUp: undefined,
    seen: undefined,
    settled: false,
    error: undefined,
    built: undefined,
    timeout: undefined,
  };
  const result = scopes.run(scope, call, scope);
  if (!(result instanceof Promise)) return result;
  return result.then(
    (value: unknown) => {
      settle(scope, undefined);
      return value;
    },
    (thrown: unknown) => {
      const error = ownOf(thrown, scope);
      carry(scope, error);
      settle(scope, error);
      throw error;
    },
  ) as T;
}

type Stainless = {
  makeRequest(...args: unknown[]): Promise<unknown>;
  withOptions(options: unknown): Stainless;
  buildBody?(arg: { options?: { body?: unknown } }): { body?: unknown };
  timeout?: unknown;
};

/** The longest timer Node keeps (a longer one fires at once). */
const NO_TIMEOUT = 2_147_483_647;

/**
 * An openai or anthropic client (the Stainless SDKs) whose every request runs in a scope:
 * `makeRequest` is what every method, paginated list and helper goes through; the clients
 * `withOptions` makes from it are scoped too. Each request's own retry knobs are taken over
 * (rule 15): its `maxRetries` goes to 0 (said once: breakwater's policy owns the retries),
 * and its `timeout` (the request's, else the client's) becomes its attempt timeout, so the
 * SDK's timer no longer cuts the whole call (all of breakwater's attempts) as a cancellation.
 */
export function scopedClient<C>(client: C, owner: string): C {
  const c = client as unknown as Stainless;
  if (typeof c.makeRequest !== "function" || typeof c.withOptions !== "function") return client;
  const makeRequest = c.makeRequest;
  const withOptions = c.withOptions;
  const defaultTimeout = defaultTimeoutOf(c);
  c.makeRequest = function (this: Stainless, options: unknown, ...rest: unknown[]) {
    return scoped((scope) => {
      const own = (o: unknown) => {
        scope.timeout = takeOver(owner, o, this.timeout, defaultTimeout);
        return o;
      };
      const taken = options instanceof Promise ? options.then(own) : own(options);
      return makeRequest.call(this, taken, ...rest);
    });
  };
  const buildBody = c.buildBody;
  if (typeof buildBody === "function")
    c.buildBody = function (this: Stainless, arg) {
      const built = buildBody.call(this, arg);
      noteBody(arg?.options?.body, built?.body);
      return built;
    };
  c.withOptions = function (this: Stainless, options: unknown) {
    return scopedClient(withOptions.call(this, options), owner);
  };
  return client;
}

/** The SDK's default timeout (`DEFAULT_TIMEOUT` on its class: 10 minutes). */
function defaultTimeoutOf(c: Stainless): number {
  let C = (c as { constructor?: unknown }).constructor as { DEFAULT_TIMEOUT?: unknown } | undefined;
  for (let i = 0; C && i < 4; i++, C = Object.getPrototypeOf(C))
    if (typeof C.DEFAULT_TIMEOUT === "number" && C.DEFAULT_TIMEOUT > 0) return C.DEFAULT_TIMEOUT;
  return 600_000;
}

/** Takes a request's retry knobs from the SDK: `maxRetries` to 0, `timeout` to breakwater.
 * A timeout equal to the SDK's default (which anthropic's `messages.create` passes on
 * every request) is no choice of the user's: it only caps the policy's. */
function takeOver(
  owner: string,
  o: unknown,
  clientTimeout: unknown,
  defaultTimeout: number,
): SdkTimeout | undefined {
  if (o === null || typeof o !== "object") return undefined;
  const options = o as { maxRetries?: unknown; timeout?: unknown };
  if (typeof options.maxRetries === "number" && options.maxRetries > 0)
    ignored(owner, "maxRetries", options.maxRetries);
  options.maxRetries = 0;
  const asked = options.timeout ?? clientTimeout;
  if (asked !== undefined && asked !== null && !(typeof asked === "number" && asked > 0))
    throw new ConfigError(owner, "timeout", asked, "a number of ms > 0 (one attempt's timeout)");
  options.timeout = NO_TIMEOUT;
  const ms = asked as number | undefined;
  return { given: ms === undefined || ms === defaultTimeout ? undefined : ms, cap: defaultTimeout };
}

const said = new Set<string>();

/** Says once that a request's own retry knob is ignored, and what to use instead. */
export function ignored(owner: string, knob: string, value: number): void {
  sayOnce(
    owner,
    `a request's ${knob} (${value}) is ignored: breakwater's policy owns the retries (its maxAttempts counts every attempt; per call, callOptions({ maxAttempts }))`,
  );
}

/** A warning given once per process for each thing said. */
export function sayOnce(owner: string, text: string): void {
  const key = `${owner}: ${text.split(" (")[0]}`;
  if (said.has(key)) return;
  said.add(key);
  process.emitWarning(`${owner}: ${text}`, { code: "BREAKWATER_SDK_RETRIES" });
}

/** A plain object: what the Stainless SDKs send as `JSON.stringify` of it. */
function plain(x: unknown): x is Record<string, unknown> {
  if (x === null || typeof x !== "object") return false;
  const proto = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}

/** The lists a request's turns are in (chat and Anthropic `messages`, Responses `input`). */
const LISTS = ["messages", "input", "contents"] as const;

/** Keeps the JSON text the SDK made of a body object, with the object. */
function noteBody(body: unknown, text: unknown): void {
  const scope = scopes.getStore();
  if (scope === undefined || typeof text !== "string" || !plain(body)) return;
  // A copy of the top level and of the conversation's list: a caller who changes the
  // model, the stream flag or the messages while the request is on its way changes what
  // it passed, not what was read of what was sent.
  const copy: Record<string, unknown> = { ...body };
  for (const k of LISTS) if (Array.isArray(copy[k])) copy[k] = [...(copy[k] as unknown[])];
  scope.built = { text, body: copy };
}

/**
 * The object a request's JSON `text` was made of, when the Stainless SDK (openai,
 * anthropic) made it in the method now running: the fetch layer then reads the model, the
 * stream flag and the limits without parsing the text again (a long conversation is tens
 * of kilobytes). Only for the very text the SDK made: a body a middleware rewrote, or
 * another request sent inside the call (a token exchange), is parsed as it is. What a
 * caller changes inside one message while the request is on its way is read as changed.
 */
export function sdkBody(text: string): Record<string, unknown> | undefined {
  const built = scopes.getStore()?.built;
  return built !== undefined && built.text === text ? built.body : undefined;
}

const attempts = new AsyncLocalStorage<number>();

/** Runs `fn` as attempt `n` of a call an adapter retries above the SDK: what it sends
 * through `attemptFetch` says which attempt it is. */
export function inAttempt<T>(n: number, fn: () => T): T {
  return attempts.run(n, fn);
}

/** The attempt the request being sent belongs to, when an adapter said. */
export function currentAttempt(): number | undefined {
  return attempts.getStore();
}

/** An iterable read as attempt `n`: each `next` runs in its scope, so a generator that sends
 * its request on its first read (LangChain's streams) says which attempt it is. */
export function inAttemptIterable<T>(n: number, source: AsyncIterable<T>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      return {
        next: () => inAttempt(n, () => it.next()),
        return: (value?: unknown) =>
          it.return?.(value) ?? Promise.resolve({ done: true as const, value: undefined }),
      };
    },
  };
}

/** The SDK's timeout for the request now being sent, when an adapter took it over. */
export function sdkTimeout(): SdkTimeout | undefined {
  return scopes.getStore()?.timeout;
}
