import { ConfigError, type PolicyOptions } from "../index.ts";
import { opt, parseOptions, type Rule, Validator } from "../internal.ts";

/** The wire format a client and an upstream speak. */
export type Wire = "openai" | "anthropic" | "google";
export const WIRES: readonly Wire[] = ["openai", "anthropic", "google"];

/** One provider endpoint the gateway calls, with its own key and policy. */
export interface UpstreamConfig {
  /** The format it speaks: the clients of a model must speak it too. */
  wire: Wire;
  /** Its base URL as its SDK takes it: "https://api.openai.com/v1",
   * "https://api.anthropic.com", "https://generativelanguage.googleapis.com"; or
   * "env:NAME" to read it from the environment. */
  baseUrl: string;
  /** Its API key: "env:NAME" reads it from the environment (never logged, never returned). */
  apiKey: string;
  /** The policy's options for calls to it (`attemptTimeoutMs`, `firstTokenTimeoutMs`,
   * `maxAttempts`, ...). @default policy()'s defaults */
  policy?: PolicyOptions;
  /** A stream that breaks after content, with a failure that could be retried, goes on
   * from the text so far (an assistant prefill: Anthropic; OpenAI-compatible servers with an
   * assistant `prefix`), so the client reads one answer; one the upstream refuses ends with
   * an error event as any break. @default false */
  continuation?: boolean;
}

/** One upstream a model goes to: its name (asked for the same model), or the name and the
 * model asked of it there. */
export type Target = string | { upstream: string; model?: string };
/** Where a model name goes: a target; a chain of them tried in order when one cannot take
 * the call now (`fallback`'s rules); or a pool of them, each call to the one with the most
 * headroom, one that fails cooling down (`pool`'s rules: LiteLLM's router's). */
export type ModelRoute = Target | Target[] | { pool: Target[] };

/** The gateway's configuration file (JSON), every key validated by name. */
export interface GatewayConfig {
  /** Where it listens. @default { host: "127.0.0.1", port: 8790 } */
  listen?: { host?: string; port?: number };
  /** The keys a client must present (Authorization: Bearer, x-api-key, x-goog-api-key):
   * "env:NAME" or the key itself. At least one. */
  keys: string[];
  upstreams: Record<string, UpstreamConfig>;
  /** Model names clients ask for, and where each goes; "*" takes any other. */
  models: Record<string, ModelRoute>;
  /** Largest request body, in bytes. @default 4 MiB */
  maxBodyBytes?: number;
  /** Open client connections at once; more are refused. @default 1024 */
  maxConnections?: number;
  /** A stream quiet this long gets an SSE comment, so proxies and clients keep it open.
   * @default 15000 */
  keepAliveMs?: number;
  /** A fleet of gateways sharing each upstream's admission, retry budget and breaker
   * through one Redis (`sharedState()`; needs the `redis` package): `redis` is its URL or
   * "env:NAME". Read at start: a reload keeps the fleet it started with. */
  fleet?: { redis: string; prefix?: string; syncMs?: number };
  /** Requests with an `Idempotency-Key`: a whole 2xx answer is kept `ttlMs` and handed to
   * the same request again (by the same client key, to the same path), within `maxBytes` of
   * answers in all; `false` forwards the header and keeps nothing. Read at start.
   * @default { ttlMs: 3600000, maxBytes: 64 MiB } */
  idempotency?: false | { ttlMs?: number; maxBytes?: number };
  /** Each upstream's calls traced and measured by `breakwater/otel` on the process's global
   * OpenTelemetry providers (`@opentelemetry/api` installed, an SDK registered), inside the
   * trace a client's `traceparent` names. Read at start. @default false */
  otel?: boolean;
}

/** A configuration read and checked, its keys resolved. */
export interface Resolved {
  readonly host: string;
  readonly port: number;
  readonly keys: ReadonlySet<string>;
  readonly upstreams: ReadonlyMap<string, UpstreamConfig & { key: string }>;
  readonly models: ReadonlyMap<string, readonly { upstream: string; model?: string }[]>;
  /** The model names routed to a pool (the rest: one upstream, or a chain). */
  readonly pools: ReadonlySet<string>;
  readonly maxBodyBytes: number;
  readonly maxConnections: number;
  readonly keepAliveMs: number;
  readonly fleet:
    | { readonly redis: string; readonly prefix: string; readonly syncMs: number }
    | undefined;
  readonly otel: boolean;
  /** Undefined: Idempotency-Key forwarded, nothing kept. */
  readonly idempotency: { readonly ttlMs: number; readonly maxBytes: number } | undefined;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

/** "env:NAME" read from `env`, else the value itself. */
function secret(
  v: Validator,
  name: string,
  x: unknown,
  env: NodeJS.ProcessEnv,
  what = "a key",
): string {
  const s = v.str(name, x);
  if (!s.startsWith("env:")) return s;
  const value = env[s.slice(4)];
  if (value === undefined || value === "")
    v.fail(name, `${s} (unset)`, `${what}, or "env:NAME" naming a variable that is set`);
  return value;
}

const UPSTREAM = {
  wire: opt.oneOf(WIRES),
  baseUrl: opt.str({
    pattern: /^(https?:\/\/[^\s]+|env:\w+)$/,
    allowed: 'an http(s) URL, or "env:NAME"',
  }),
  apiKey: opt.str(),
  policy: opt.any<PolicyOptions>(
    (p) => p !== null && typeof p === "object" && !Array.isArray(p),
    "policy options ({ maxAttempts, attemptTimeoutMs, ... })",
  ),
  continuation: opt.bool(),
};

const SPEC = {
  listen: opt.record({
    host: opt.str(),
    port: opt.int({ min: 0, max: 65_535 }),
  }),
  keys: opt.list(opt.str()),
  upstreams: opt.any<Record<string, unknown>>(
    (x) => x !== null && typeof x === "object" && !Array.isArray(x),
    "an object of upstreams by name",
  ),
  models: opt.any<Record<string, unknown>>(
    (x) => x !== null && typeof x === "object" && !Array.isArray(x),
    "an object of model names and where each goes",
  ),
  maxBodyBytes: opt.int({ min: 1, default: 4 << 20 }),
  maxConnections: opt.int({ min: 1, default: 1024 }),
  keepAliveMs: opt.int({ min: 100, default: 15_000 }),
  fleet: opt.record({
    redis: opt.str(),
    prefix: opt.str({ pattern: /^[\w:.-]+$/, allowed: "letters, digits and _ : . -" }),
    syncMs: opt.int({ min: 10, max: 60_000 }),
  }),
  otel: opt.bool(false),
  idempotency: opt.any<false | { ttlMs?: number; maxBytes?: number }>(
    (x) => x === false || (x !== null && typeof x === "object" && !Array.isArray(x)),
    "false, or { ttlMs, maxBytes }",
  ),
} satisfies Record<keyof GatewayConfig, Rule<unknown>>;

/** One model's targets, each an upstream that exists. */
function route(
  v: Validator,
  name: string,
  x: unknown,
  ups: ReadonlyMap<string, UpstreamConfig>,
): { upstream: string; model?: string }[] {
  const list = Array.isArray(x) ? x : [x];
  if (list.length === 0)
    v.fail(name, x, "an upstream's name, { upstream, model }, a list of them, or { pool: [...] }");
  const out = list.map((t, i) => {
    const at = Array.isArray(x) ? `${name}[${i}]` : name;
    const target =
      typeof t === "string"
        ? { upstream: t }
        : parseOptions(v, { upstream: opt.str(), model: opt.str() }, t, at);
    if (target.upstream === undefined || !ups.has(target.upstream))
      v.fail(
        `${at}.upstream`,
        target.upstream,
        `one of the upstreams (${[...ups.keys()].join(", ")})`,
      );
    return target as { upstream: string; model?: string };
  });
  const wires = new Set(out.map((t) => ups.get(t.upstream)!.wire));
  if (wires.size > 1)
    v.fail(name, x, "upstreams of one wire format (a client speaks one; no translation)");
  return out;
}

/** A pool route's targets (`{ "pool": [...] }`, two or more), or undefined for another route. */
function poolOf(v: Validator, name: string, x: unknown): unknown[] | undefined {
  if (x === null || typeof x !== "object" || Array.isArray(x) || !("pool" in x)) return undefined;
  const { pool, ...rest } = x as { pool: unknown };
  const extra = Object.keys(rest)[0];
  if (extra !== undefined)
    v.fail(
      `${name}.${extra}`,
      (rest as Record<string, unknown>)[extra],
      "absent (a pool route takes only pool)",
    );
  if (!Array.isArray(pool) || pool.length < 2)
    v.fail(`${name}.pool`, pool, "a list of two or more upstreams (names or { upstream, model })");
  return pool;
}

/** Each upstream checked, its key and base URL resolved. */
function upstreamsOf(
  v: Validator,
  given: Record<string, unknown> | undefined,
  env: NodeJS.ProcessEnv,
) {
  const upstreams = new Map<string, UpstreamConfig & { key: string }>();
  for (const [name, raw] of Object.entries(
    given ?? v.fail("upstreams", undefined, "an object of upstreams by name"),
  )) {
    const u = parseOptions(v, UPSTREAM, raw, `upstreams.${name}`);
    const need = (k: keyof typeof u) =>
      u[k] ?? v.fail(`upstreams.${name}.${k}`, undefined, "given");
    const baseUrl = secret(v, `upstreams.${name}.baseUrl`, need("baseUrl"), env, "a URL");
    if (!/^https?:\/\/\S+$/.test(baseUrl))
      v.fail(`upstreams.${name}.baseUrl`, baseUrl, "an http(s) URL");
    upstreams.set(name, {
      wire: need("wire") as Wire,
      baseUrl: baseUrl.replace(/\/+$/, ""),
      apiKey: "(redacted)",
      key: secret(v, `upstreams.${name}.apiKey`, need("apiKey"), env),
      ...(u.policy !== undefined && { policy: u.policy }),
      ...(u.continuation !== undefined && { continuation: u.continuation }),
    });
  }
  return upstreams;
}

const IDEMPOTENCY = {
  ttlMs: opt.int({ min: 1_000, max: 7 * 86_400_000, default: 3_600_000 }),
  maxBytes: opt.int({ min: 1 << 16, default: 64 << 20 }),
};

/** How long, and how much of, the answers to Idempotency-Key requests are kept. */
function idempotencyOf(v: Validator, x: unknown) {
  return x === false ? undefined : parseOptions(v, IDEMPOTENCY, x ?? {}, "idempotency");
}

/** Each model's route checked against the upstreams; the names routed to a pool. */
function modelsOf(
  v: Validator,
  given: Record<string, unknown> | undefined,
  upstreams: ReadonlyMap<string, UpstreamConfig>,
) {
  const models = new Map<string, { upstream: string; model?: string }[]>();
  const pools = new Set<string>();
  for (const [name, raw] of Object.entries(
    given ?? v.fail("models", undefined, "an object of model routes"),
  )) {
    const pooled = poolOf(v, `models.${name}`, raw);
    if (pooled !== undefined) pools.add(name);
    models.set(
      name,
      route(
        v,
        pooled === undefined ? `models.${name}` : `models.${name}.pool`,
        pooled ?? raw,
        upstreams,
      ),
    );
  }
  return { models, pools };
}

/** Reads a configuration (parsed JSON), naming the key and value of anything wrong. */
export function resolveConfig(input: unknown, env: NodeJS.ProcessEnv = process.env): Resolved {
  const v = new Validator("gateway config");
  const o = parseOptions(v, SPEC, input);
  const host = o.listen?.host ?? "127.0.0.1";
  if (!LOOPBACK.has(host) && env.BREAKWATER_GATEWAY_PUBLIC !== "1")
    v.fail(
      "listen.host",
      host,
      'a loopback address ("127.0.0.1", "::1"), or set BREAKWATER_GATEWAY_PUBLIC=1',
    );
  const keys = (o.keys ?? []).map((k, i) => secret(v, `keys[${i}]`, k, env));
  if (keys.length === 0) v.fail("keys", o.keys, "at least one key clients must present");
  const upstreams = upstreamsOf(v, o.upstreams, env);
  if (upstreams.size === 0) v.fail("upstreams", o.upstreams, "at least one upstream");
  const { models, pools } = modelsOf(v, o.models, upstreams);
  if (models.size === 0) v.fail("models", o.models, "at least one model");
  const fleet =
    o.fleet === undefined
      ? undefined
      : {
          redis: secret(
            v,
            "fleet.redis",
            o.fleet.redis ?? v.fail("fleet.redis", undefined, "a redis:// URL"),
            env,
            "a URL",
          ),
          prefix: o.fleet.prefix ?? "breakwater-gateway",
          syncMs: o.fleet.syncMs ?? 100,
        };
  return {
    fleet,
    idempotency: idempotencyOf(v, o.idempotency),
    otel: o.otel,
    host,
    port: o.listen?.port ?? 8790,
    keys: new Set(keys),
    upstreams,
    models,
    pools,
    maxBodyBytes: o.maxBodyBytes,
    maxConnections: o.maxConnections,
    keepAliveMs: o.keepAliveMs,
  };
}

export { ConfigError };
