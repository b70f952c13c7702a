import { ConfigError, type Policy, type PolicyOptions, policy, type Run } from "../index.ts";
import {
  type LayerMark,
  layerMark,
  markLayer,
  opt,
  type Parsed,
  POLICY_OPTIONS,
  parseOptions,
  type Spec,
} from "../internal.ts";
import { errorBodyAsStatus } from "./dialect.ts";

/** What every adapter accepts: the policy, and the run its calls draw on. */
export interface AdapterOptions {
  /** The policy that owns retry (or its options). Default: policy() defaults. */
  policy?: Policy | PolicyOptions;
  /** The run every call draws on (deadline, attempts, tokens), or a function returning the
   * current one. OpenAI and Anthropic calls also take `{ run }` in their request options. */
  run?: Run | (() => Run | undefined);
}

const isPolicy = (p: unknown): p is Policy =>
  p !== null &&
  typeof p === "object" &&
  typeof (p as Policy).execute === "function" &&
  typeof (p as Policy).stream === "function";

/** The options every adapter takes: the table its validation derives from. */
export const ADAPTER_SPEC = {
  policy: opt.any<Policy | PolicyOptions>(
    (p) => p !== null && typeof p === "object" && !Array.isArray(p),
    "a Policy (policy({ ... })) or policy options",
  ),
  run: opt.any<Run | (() => Run | undefined)>(
    (r) => typeof r === "function" || (r !== null && typeof r === "object"),
    "a Run, or a function returning the current one",
  ),
};

/** The options of the fetch layer an adapter passes on (all but `fetch` and `dialect`). */
export const FETCH_SPEC = {
  ...ADAPTER_SPEC,
  connectTimeoutMs: opt.int({ min: 1, max: 2_147_483_647, default: Number.NaN }),
  attemptHeader: opt.any<string | false>(
    (h) => h === false || (typeof h === "string" && /^[A-Za-z0-9-]+$/.test(h)),
    "a header name or false",
  ),
  continuation: opt.bool(false),
  truncation: opt.oneOf(["error", "allow"] as const, "error"),
  fencedJson: opt.bool(true),
  contextTokens: opt.int({ min: 1, default: Number.NaN }),
  reconcile: opt.fn<(request: never) => unknown>(),
};

/**
 * An adapter's options, checked by its table under its own name. A policy's option given
 * to the adapter (`maxAttempts`, after the SDK's `maxRetries`) is the most natural mistake:
 * the error says where it goes instead of listing what is allowed.
 */
export function adapterOptions<S extends Spec>(
  owner: string,
  spec: S,
  options: unknown,
): Parsed<S> {
  if (options !== null && typeof options === "object" && !Array.isArray(options))
    for (const key of Object.keys(options))
      if (!Object.hasOwn(spec, key) && POLICY_OPTIONS.includes(key)) {
        const value = (options as Record<string, unknown>)[key];
        if (value !== undefined)
          throw new ConfigError(
            owner,
            key,
            value,
            `given to the policy (${whereItGoes(owner, key)}): it is a policy option`,
          );
      }
  return parseOptions(owner, spec, options);
}

/** Where a policy option given to an adapter goes, in the adapter's own call shape. */
function whereItGoes(owner: string, key: string): string {
  const policy = `{ policy: { ${key}: ... } }`;
  if (owner === "callOptions")
    return "the policy the client is wrapped with; per call, callOptions takes deadlineMs, attemptTimeoutMs, maxAttempts and hedge";
  if (owner.includes("pi-ai")) return `withBreakwater(pi, ${policy})`;
  if (owner.endsWith("withBreakwater")) return `${owner}(client, ${policy})`;
  return `${owner}(${policy})`;
}

/** The run for one call: the call's own, else the adapter's (its factory's, made now). */
export function runOf(options: AdapterOptions, own?: unknown): Run | undefined {
  const run =
    (own as Run | undefined) ?? (typeof options.run === "function" ? options.run() : options.run);
  return run || undefined;
}

/** The run for one call, as call options to spread. */
export function runFor(options: AdapterOptions, own?: unknown): { run?: Run } {
  const run = runOf(options, own);
  return run ? { run } : {};
}

/** `x` marked, for `audit`, as breakwater's layer `owner`: with the attempts of the policy
 * it runs under, or of the fetch layer it sends through (which made that policy). */
export function marked<T extends object>(x: T, owner: string, under: Policy | object): T {
  return markLayer(x, markOf(owner, under));
}

/** What the mark of layer `owner` says (see `marked`). */
export function markOf(owner: string, under: Policy | object): LayerMark {
  return {
    owner,
    attempts: isPolicy(under) ? under.options.maxAttempts : layerMark(under)!.attempts,
  };
}

/** A built policy, or one built from options (the adapter's default when none is given). */
export function asPolicy(p: Policy | PolicyOptions | undefined): Policy {
  return isPolicy(p) ? p : policy(p ?? {});
}

/** Tells a policy's limiter where the limits stand, from an answer's headers (a `Headers`,
 * or the record the AI SDK hands back), errors' too; a limiter that throws costs nothing. */
export function hear(limiter: Policy["options"]["limiter"], headers: unknown): void {
  if (limiter === undefined || headers === null || typeof headers !== "object") return;
  try {
    limiter.observeHeaders(headers);
  } catch {}
}

/**
 * `fetch` (else the global one at each request) for an SDK client a framework builds from
 * its options, where breakwater retries above the SDK: every answer's headers heard by
 * `limiter`, and a 2xx whose JSON body is an error handed on as the status it stands for
 * (the SDK would read it as an answer and fail on it with a TypeError).
 */
export function frameworkFetch(
  limiter: Policy["options"]["limiter"],
  fetch: unknown,
): typeof globalThis.fetch {
  return async (input, init) => {
    const f = typeof fetch === "function" ? (fetch as typeof globalThis.fetch) : globalThis.fetch;
    const res = await f(input, init);
    hear(limiter, res.headers);
    return errorBodyAsStatus(res);
  };
}

/** A view of `target` in which a few paths are replaced; everything else passes through. */
export function overlay<T extends object>(
  target: T,
  overrides: Record<string | symbol, unknown>,
): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      if (Object.hasOwn(overrides, prop)) return overrides[prop];
      const v = Reflect.get(t, prop, receiver);
      return typeof v === "function" ? v.bind(t) : v;
    },
  });
}

/** `withBreakwater(x)` where x is not the SDK's client: a clear error naming what was
 * expected, not a TypeError from deep inside. `is` tells the SDK's client from the others
 * (an openai client handed to the anthropic adapter fails here, not at the first call). */
export function checkClient(
  client: unknown,
  owner: string,
  expected: string,
  is: (c: Record<string, any>) => boolean,
): void {
  const c = client as Record<string, any> | null;
  if (c === null || typeof c !== "object" || typeof c.withOptions !== "function" || !is(c))
    throw new ConfigError(owner, "client", client, expected);
}

/** What a chat call is, as telemetry names it: the model's name and its provider's (an
 * SDK's own name for it, read by `genAiProvider`), each when known. */
export function chatLabels(
  model: unknown,
  provider: unknown,
): { model?: string; provider?: string; operation: string } {
  const p = genAiProvider(provider);
  return {
    ...(typeof model === "string" && model !== "" && { model }),
    ...(p !== undefined && { provider: p }),
    operation: "chat",
  };
}

/** The GenAI conventions' `gen_ai.provider.name` for an SDK's own name of its provider
 * ("openai.chat", "anthropic.messages", "google.generative-ai", LangChain's
 * `_llmType()`): the conventions' word where they have one, else the SDK's. */
export function genAiProvider(name: unknown): string | undefined {
  if (typeof name !== "string" || name === "") return undefined;
  const head = name.toLowerCase().split(/[.:/]/)[0]!;
  return GENAI_PROVIDERS[head] ?? head;
}

const GENAI_PROVIDERS: Readonly<Record<string, string>> = {
  openai: "openai",
  "azure-openai": "azure.ai.openai",
  azure: "azure.ai.openai",
  anthropic: "anthropic",
  google: "gcp.gemini",
  "google-genai": "gcp.gemini",
  google_genai: "gcp.gemini",
  googlegenerativeai: "gcp.gemini",
  vertex: "gcp.vertex_ai",
  "google-vertex": "gcp.vertex_ai",
  "amazon-bedrock": "aws.bedrock",
  bedrock: "aws.bedrock",
  mistral: "mistral_ai",
  mistralai: "mistral_ai",
  xai: "x_ai",
  groq: "groq",
  deepseek: "deepseek",
  cohere: "cohere",
  perplexity: "perplexity",
};
