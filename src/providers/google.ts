/**
 * The Google Gen AI adapter (`@google/genai`): Gemini calls through breakwater.
 *
 * @example
 * ```ts
 * import { GoogleGenAI } from "@google/genai";
 * import { withBreakwater } from "breakwater/google";
 *
 * const ai = withBreakwater(new GoogleGenAI({ apiKey: process.env.GEMINI_API_KEY }));
 * const r = await ai.models.generateContent({ model: "gemini-2.5-flash", contents: "Hello" });
 * console.log(r.text);
 * ```
 * @module breakwater/google
 */
import type { GoogleGenAI } from "@google/genai";
import { ConfigError } from "../index.ts";
import { LAYER } from "../internal.ts";
import { googleDialect } from "./dialects/google.ts";
import { type GuardedFetchOptions, guardedFetch } from "./fetch.ts";
import { ignored, type SdkTimeout, scoped } from "./scope.ts";
import { adapterOptions, FETCH_SPEC, markOf, overlay } from "./shared.ts";

/** What `withBreakwater` takes for a @google/genai client: the fetch layer's options (policy, run, connect timeout, attempt header, truncation, context window). */
export type GoogleAdapterOptions = Omit<GuardedFetchOptions, "dialect" | "fetch">;

type Obj = Record<string, any>;

const OWNER = "google.withBreakwater";

export { googleDialect, googleUsage, isGoogleContent } from "./dialects/google.ts";

const isObject = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** The modules whose requests take `config.httpOptions` (the Live API is a WebSocket). */
const MODULES = [
  "models",
  "batches",
  "caches",
  "files",
  "operations",
  "tunings",
  "authTokens",
  "fileSearchStores",
];

/**
 * A module whose every method sends its request through `fetch`, one SDK attempt each
 * (rule 15): a request's own `retryOptions` are set to one attempt (said once), and its
 * `timeout` (the request's, else the client's) becomes its attempt timeout, so the SDK's
 * abort no longer ends the call as a cancellation.
 */
function through<T extends object>(
  module: T,
  fetch: typeof globalThis.fetch,
  clientTimeout: unknown,
): T {
  const calls = new Map<PropertyKey, unknown>();
  return new Proxy(module, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      if (!calls.has(prop))
        calls.set(prop, (...args: unknown[]) => {
          const [params, ...rest] = args;
          if (!isObject(params)) return v.apply(target, args);
          const config = (params.config ?? {}) as Obj;
          const asked = (config.httpOptions ?? {}) as Obj;
          const timeout = sdkTimeoutOf(asked, clientTimeout);
          const httpOptions = {
            ...asked,
            fetch,
            retryOptions: { attempts: 1 },
            timeout: 0, // none: the attempt timeout is breakwater's
          };
          const sent = [{ ...params, config: { ...config, httpOptions } }, ...rest];
          // Its errors are built from the body alone: the scope tells them how the call ended.
          return scoped((scope) => {
            scope.timeout = timeout;
            return v.apply(target, sent);
          });
        });
      return calls.get(prop);
    },
  });
}

/** A request's timeout for breakwater (the SDK has no default one), and a word when it
 * asked for retries of its own. */
function sdkTimeoutOf(asked: Obj, clientTimeout: unknown): SdkTimeout | undefined {
  const attempts = (asked.retryOptions as Obj | undefined)?.attempts;
  if (typeof attempts === "number" && attempts > 1)
    ignored(OWNER, "retryOptions.attempts", attempts);
  const ms = asked.timeout ?? clientTimeout;
  if (ms === undefined || ms === null) return undefined;
  if (!(typeof ms === "number" && ms > 0))
    throw new ConfigError(
      OWNER,
      "httpOptions.timeout",
      ms,
      "a number of ms > 0 (one attempt's timeout)",
    );
  return { given: ms, cap: Number.POSITIVE_INFINITY };
}

/**
 * Routes every HTTP request of a `@google/genai` client through one policy: each method of
 * `models`, `batches`, `caches`, `files`, `operations`, `tunings`, `authTokens` and
 * `fileSearchStores` is sent with breakwater's fetch and the SDK's retries at one attempt,
 * and `chats` talk through those `models`. Objects and errors stay the SDK's own. Each
 * continuation hop of a resumable stream is its own request, and is counted.
 */
export function withBreakwater<C extends GoogleGenAI>(
  client: C,
  options: GoogleAdapterOptions = {},
): C {
  const models = isObject(client) ? (client as Obj).models : undefined;
  if (!isObject(models) || typeof models.generateContent !== "function")
    throw new ConfigError(
      OWNER,
      "client",
      client,
      "a GoogleGenAI client (new GoogleGenAI({ apiKey }))",
    );
  const clientHttp = (client as Obj).httpOptions as Obj | undefined;
  const base = clientHttp?.fetch as typeof globalThis.fetch | undefined;
  adapterOptions(OWNER, FETCH_SPEC, options);
  const fetch = guardedFetch({ ...options, ...(base && { fetch: base }), dialect: googleDialect });
  const overrides: Record<string, unknown> = {};
  for (const name of MODULES) {
    const m = (client as Obj)[name];
    if (isObject(m)) overrides[name] = through(m, fetch, clientHttp?.timeout);
  }
  const chats = (client as Obj).chats as Obj | undefined;
  if (chats && typeof chats.constructor === "function")
    overrides.chats = new (chats.constructor as new (m: unknown, api: unknown) => unknown)(
      overrides.models,
      (client as Obj).apiClient,
    );
  // The mark in the overlay: the client underneath is the user's own, left unmarked.
  return overlay(client, { ...overrides, [LAYER]: markOf(OWNER, fetch) });
}
