/**
 * `breakwater gateway`: one retry layer for any language, behind one base URL. An HTTP
 * server that speaks OpenAI's (chat completions, responses, embeddings), Anthropic's
 * (messages) and Google's (generateContent) APIs as their SDKs send them, so a Python, Go
 * or curl client changes only its base URL; each model name goes to an upstream or a chain
 * of them under the library's policy and its defaults.
 *
 * @example
 * ```ts
 * import { gateway } from "breakwater/gateway";
 *
 * const gw = await gateway({
 *   listen: { port: 0 },
 *   keys: ["sk-gateway-test"],
 *   upstreams: { openai: { wire: "openai", baseUrl: process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1", apiKey: "env:OPENAI_API_KEY" } },
 *   models: { "gpt-4o-mini": "openai" },
 * });
 * const res = await fetch(`${gw.url}/v1/chat/completions`, {
 *   method: "POST",
 *   headers: { authorization: "Bearer sk-gateway-test", "content-type": "application/json" },
 *   body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] }),
 * });
 * console.log(res.status, res.headers.get("x-breakwater-attempts"));
 * await gw.close();
 * ```
 * @module breakwater/gateway
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type CircuitBreakerOptions,
  ConfigError,
  isLimiter,
  type PolicyOptions,
  type Pool,
  policy,
  RateLimiter,
  type RateLimiterOptions,
  type RetryBudgetOptions,
  reasonOf,
} from "../index.ts";
import { safeJson } from "../providers/dialect.ts";
import { guardedFetch } from "../providers/fetch.ts";
import { ReadResponse } from "../providers/read-response.ts";
import type { SharedState } from "../redis/index.ts";
import { type GatewayConfig, type Resolved, resolveConfig, type UpstreamConfig } from "./config.ts";
import { type Hop, type LiveUpstream, poolOf, refusal, send } from "./forward.ts";
import { GatewayMetrics } from "./metrics.ts";
import { type Answer, IDEMPOTENCY_KEY, Replays } from "./replays.ts";
import { attemptHeaders, costHeaders, headersOf, pipeStream } from "./respond.ts";
import { Runs, Tally } from "./runs.ts";
import { type Telemetry, telemetry } from "./telemetry.ts";
import { gatewayFetch } from "./transport.ts";
import { type ClientCall, clientKey, errorBody, readCall, wireOfPath } from "./wires.ts";

export type { GatewayConfig, ModelRoute, Target, UpstreamConfig, Wire } from "./config.ts";

/** A running gateway. */
export interface Gateway {
  /** Where it listens: "http://127.0.0.1:8790". */
  readonly url: string;
  readonly metrics: GatewayMetrics;
  /** Takes a new configuration: calls in flight finish under the one they began with; an
   * upstream whose settings did not change keeps its policy (its limits, admission,
   * breaker). Throws, changing nothing, when the new one is not valid. */
  reload(config: GatewayConfig | unknown): void;
  /** Stops listening and waits for the calls in flight. */
  close(): Promise<void>;
}

/** The configuration in force, with each upstream live. */
interface State {
  readonly config: Resolved;
  readonly upstreams: ReadonlyMap<string, LiveUpstream>;
  /** Each pool route's pool, made once: it learns across requests (cooldowns, picks). */
  readonly pools: ReadonlyMap<string, Pool<Response>>;
}

/** What the gateway's upstreams are made with, once, at start: the fleet's shared state,
 * OpenTelemetry, and the transport. */
interface Gear {
  readonly fleet: Shared | undefined;
  readonly tele: Telemetry | undefined;
  readonly transport: ReturnType<typeof gatewayFetch>;
}

/** What the gateways of a fleet share (`breakwater/redis`'s `sharedState`). */
type Shared = Pick<SharedState, "admission" | "budget" | "breaker" | "limiter">;

/** An upstream's policy: its options, with its admission (or retry budget) and its breaker
 * shared by the fleet when there is one. */
function policyFor(
  name: string,
  u: Pick<UpstreamConfig, "policy" | "wire">,
  fleet: Shared | undefined,
  tele: Telemetry | undefined,
) {
  const settings = u.policy;
  const o: PolicyOptions = { ...settings };
  if (tele !== undefined && o.observe === undefined) o.observe = tele.observer(u.wire);
  if (fleet !== undefined) {
    const budget = o.budget ?? o.admission;
    delete o.admission;
    if (budget === false) o.budget = false;
    else if (budget !== undefined && typeof budget === "object")
      o.budget = fleet.budget(name, budget as RetryBudgetOptions);
    else o.budget = fleet.admission(name);
    if (o.breaker !== undefined)
      o.breaker = fleet.breaker(name, o.breaker as CircuitBreakerOptions);
    // One 429's Retry-After holds the fleet's calls to this upstream, not one gateway's.
    if (o.limiter !== false) {
      const given = o.limiter as RateLimiterOptions | undefined;
      o.limiter = fleet.limiter(name, isLimiter(given) ? given : new RateLimiter({ ...given }));
    }
  }
  try {
    return policy(o);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ConfigError("gateway config", `upstreams.${name}.policy`, settings, message);
  }
}

/** Each upstream with its policy and fetch layer; one unchanged since `prior` keeps its own. */
function live(config: Resolved, prior: State | undefined, gear: Gear): State {
  const { fleet, tele, transport } = gear;
  const upstreams = new Map<string, LiveUpstream>();
  for (const [name, u] of config.upstreams) {
    const was = prior?.upstreams.get(name);
    const same =
      was !== undefined &&
      was.wire === u.wire &&
      was.baseUrl === u.baseUrl &&
      was.key === u.key &&
      was.continuation === u.continuation &&
      JSON.stringify(was.settings) === JSON.stringify(u.policy);
    if (same) {
      upstreams.set(name, was);
      continue;
    }
    const p = policyFor(name, u, fleet, tele);
    const { policy: settings, ...rest } = u;
    const layer = guardedFetch({
      policy: p,
      continuation: u.continuation === true,
      fetch: transport,
    });
    upstreams.set(name, { ...rest, name, policy: p, settings, fetch: layer });
  }
  const pools = new Map<string, Pool<Response>>();
  for (const name of config.pools) {
    const targets = config.models.get(name)!.map((t) => ({ ...t, up: upstreams.get(t.upstream)! }));
    pools.set(name, poolOf(targets));
  }
  return { config, upstreams, pools };
}

/** Reads a request body up to `max` bytes; undefined when it is larger. (Its events, not
 * its async iterator: the iterator costs each request a few microseconds more.) */
function bodyOf(req: IncomingMessage, max: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const data = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= max) return chunks.push(chunk);
      req.off("data", data);
      req.resume(); // the rest is let go, not read into memory
      resolve(undefined);
    };
    req.on("data", data);
    req.once("end", () => {
      if (size <= max)
        resolve(
          chunks.length === 1
            ? chunks[0]!.toString("utf8")
            : Buffer.concat(chunks).toString("utf8"),
        );
    });
    req.once("error", reject);
    req.once("close", () => {
      if (!req.complete) reject(new Error("the client closed the request before its body ended"));
    });
  });
}

/** Answers with an error body in the client's format. */
function fail(
  out: ServerResponse,
  wire: ClientCall["wire"],
  status: number,
  code: string,
  message: string,
  extra: Record<string, string> = {},
): void {
  if (out.headersSent) return void out.end();
  const body = errorBody(wire, status, code, message);
  out.writeHead(status, {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
    ...extra,
  });
  out.end(body);
}

/** The body's JSON when it is an object (what every API here takes), else undefined. */
const parse = (text: string): Record<string, unknown> | undefined => {
  const j = safeJson(text);
  return j !== null && typeof j === "object" && !Array.isArray(j)
    ? (j as Record<string, unknown>)
    : undefined;
};

/** The route of a model: its hops (the upstream and the model asked of it) and, for a pool
 * route, its pool; undefined when no route takes it. */
function routeOf(state: State, model: string | undefined) {
  const { models } = state.config;
  const name = model !== undefined && models.has(model) ? model : "*";
  const route = models.get(name);
  if (route === undefined) return undefined;
  const hops: Hop[] = route.map((t) => ({
    up: state.upstreams.get(t.upstream)!,
    model: t.model ?? model ?? "",
  }));
  return { hops, pool: state.pools.get(name) };
}

/** What the gateway keeps across requests: its counters, the agents' runs, and the answers
 * to requests with an Idempotency-Key. */
interface Books {
  readonly metrics: GatewayMetrics;
  readonly runs: Runs;
  /** Undefined when the configuration the gateway started with turned them off. */
  readonly replays: Replays | undefined;
  /** With `"otel": true`: the trace a client's headers carry is continued. */
  readonly telemetry: Telemetry | undefined;
}

/** One client request, start to end. */
async function handle(state: State, books: Books, req: IncomingMessage, out: ServerResponse) {
  const { metrics } = books;
  const url = new URL(req.url ?? "/", "http://gateway");
  if (req.method === "GET" && url.pathname === "/metrics") {
    out.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
    return void out.end(metrics.text());
  }
  if (req.method === "GET" && url.pathname === "/health") return void out.end("ok");
  const wire = wireOfPath(url.pathname);
  const key = clientKey(req.headers, url.search);
  if (key === undefined || !state.config.keys.has(key)) {
    req.resume(); // nothing read, nothing sent upstream
    metrics.request("", "unauthorized");
    return fail(out, wire, 401, "invalid_api_key", "the gateway does not know this key");
  }
  const text = await bodyOf(req, state.config.maxBodyBytes);
  if (text === undefined) {
    out.setHeader("connection", "close");
    return fail(
      out,
      wire,
      413,
      "request_too_large",
      `the body is over ${state.config.maxBodyBytes} bytes`,
    );
  }
  const json = parse(text);
  const call = readCall(req.method ?? "GET", url.pathname, url.search, text, json);
  const unknown = `no API here answers ${req.method} ${url.pathname}`;
  if (call === undefined) return fail(out, wire, 404, "unknown_route", unknown);
  if (json === undefined && call.wire !== "google")
    return fail(out, wire, 400, "invalid_json", "the body is not a JSON object");
  const route = routeOf(state, call.model);
  if (route === undefined)
    return fail(
      out,
      wire,
      404,
      "model_not_found",
      `the gateway has no route for the model ${JSON.stringify(call.model)}`,
    );
  const idem = req.headers["idempotency-key"];
  const go = (keep?: (answer: Answer | undefined) => void) =>
    forward(state, books, call, route, req, out, keep);
  if (idem === undefined || books.replays === undefined) return go();
  if (typeof idem !== "string" || !IDEMPOTENCY_KEY.test(idem))
    return fail(out, wire, 400, "invalid_idempotency_key", IDEMPOTENCY_ALLOWED);
  // One client's key, one route: another client's same key is another request.
  await once(
    books.replays,
    `${key}\n${req.method} ${url.pathname}${url.search}\n${idem}`,
    text,
    go,
    wire,
    out,
  );
}

const IDEMPOTENCY_ALLOWED = "an Idempotency-Key of 1 to 255 printable ASCII characters";

/** A request with an Idempotency-Key: the first goes upstream and its whole 2xx answer is
 * kept; the same request again gets that answer (`x-breakwater-replayed: true`), nothing
 * sent; again while the first is under way, it waits for it; the key with another body
 * is a 422. */
async function once(
  replays: Replays,
  key: string,
  body: string,
  run: (keep: (answer: Answer | undefined) => void) => Promise<void>,
  wire: ClientCall["wire"],
  out: ServerResponse,
): Promise<void> {
  for (;;) {
    const turn = replays.begin(key, body);
    if (turn.kind === "first") {
      let told = false;
      const keep = (answer: Answer | undefined) => {
        told = true;
        turn.done(answer);
      };
      try {
        return await run(keep);
      } finally {
        if (!told) turn.done(undefined);
      }
    }
    if (turn.kind === "wait") await turn.settled;
    else if (turn.kind === "mismatch")
      return fail(
        out,
        wire,
        422,
        "idempotency_key_reused",
        "this Idempotency-Key came with another request body",
      );
    else {
      const { status, headers, body: answer } = turn.answer;
      out.writeHead(status, {
        ...headers,
        "x-breakwater-replayed": "true",
        "content-length": String(answer.length),
      });
      return void out.end(answer);
    }
  }
}

/** Sends the call on and hands the client what came back, as it comes; `keep` is told the
 * answer once it was handed on whole and 2xx (else undefined). */
async function forward(
  state: State,
  books: Books,
  call: ClientCall,
  route: { hops: Hop[]; pool: Pool<Response> | undefined },
  req: IncomingMessage,
  out: ServerResponse,
  keep?: (answer: Answer | undefined) => void,
) {
  // A request that waited for another with its Idempotency-Key may find its client gone.
  if (out.destroyed) return keep?.(undefined);
  const { metrics, runs } = books;
  const model = call.model ?? "";
  const gone = new AbortController();
  out.once("close", () => {
    if (!out.writableFinished) gone.abort(new Error("the client left"));
  });
  const joined = runs.of(req.headers);
  if ("error" in joined) return fail(out, call.wire, 400, "invalid_run", joined.error);
  const t = new Tally(joined.run);
  let res: Response;
  try {
    const go = () => send(route.hops, call, req.headers, gone.signal, t.run, route.pool);
    res = await (books.telemetry === undefined ? go() : books.telemetry.within(req.headers, go));
  } catch (error) {
    keep?.(undefined);
    const r = refusal(error);
    metrics.request(model, r.reason);
    metrics.attempts(model, t.attempts);
    const wait: Record<string, string> =
      r.retryAfterMs === undefined
        ? {}
        : { "retry-after": String(Math.ceil(r.retryAfterMs / 1000)) };
    const message = error instanceof Error ? error.message : String(error);
    return fail(out, call.wire, r.status, r.reason, message, {
      "x-breakwater-reason": r.reason,
      ...attemptHeaders(t),
      ...wait,
    });
  }
  // The content type first: asking a JSON answer read whole for its body would build one.
  const streaming =
    (res.headers.get("content-type") ?? "").includes("event-stream") && res.body !== null;
  const keeping = keep === undefined ? undefined : books.replays?.maxAnswerBytes;
  const answer = streaming
    ? await handOnStream(res, t, call, out, state.config.keepAliveMs, metrics, keeping)
    : await handOnJson(res, t, model, out, metrics);
  keep?.(res.ok ? answer : undefined);
}

/** A JSON answer, whole, with what it cost; what was handed on. */
async function handOnJson(
  res: Response,
  t: Tally,
  model: string,
  out: ServerResponse,
  metrics: GatewayMetrics,
): Promise<Answer> {
  // An answer read whole hands on its text (asking for its bytes would build a body).
  const body =
    res instanceof ReadResponse
      ? Buffer.from(await res.text())
      : Buffer.from(await res.arrayBuffer());
  // A non-2xx answer is the provider's, handed on when the policy gave up on it: why.
  const why = res.ok ? undefined : (reasonOf({ headers: res.headers }) ?? "not-retryable");
  metrics.request(model, why ?? "ok");
  metrics.attempts(model, t.attempts);
  const cost = t.cost();
  metrics.tokens(model, cost.billed, cost.wasted);
  const said: Record<string, string> = why === undefined ? {} : { "x-breakwater-reason": why };
  const headers = headersOf(res, t, { ...costHeaders(cost), ...said });
  out.writeHead(res.status, { ...headers, "content-length": String(body.length) });
  out.end(body);
  return { status: res.status, headers, body };
}

/** A stream, passed on as it comes; what was handed on, when it ended whole. */
async function handOnStream(
  res: Response,
  t: Tally,
  call: ClientCall,
  out: ServerResponse,
  keepAliveMs: number,
  metrics: GatewayMetrics,
  keeping: number | undefined,
): Promise<Answer | undefined> {
  const model = call.model ?? "";
  const headers = headersOf(res, t);
  out.writeHead(res.status, headers);
  // Its bytes are kept only for an Idempotency-Key's replay, and only up to what is kept.
  let seen: Buffer[] | undefined = keeping === undefined ? undefined : [];
  let size = 0;
  const ended = await pipeStream(res.body!, out, call, keepAliveMs, (c) => {
    if (seen === undefined) return;
    size += c.length;
    if (size > keeping!) seen = undefined;
    else seen.push(Buffer.from(c));
  });
  // A stream that ended on the provider's error event ended cleanly, but failed: the fetch
  // layer said why on its headers.
  const why = ended === "ok" ? (reasonOf({ headers: res.headers }) ?? "ok") : ended;
  metrics.request(model, why);
  metrics.attempts(model, t.attempts);
  const cost = t.cost();
  metrics.tokens(model, cost.billed, cost.wasted);
  if (why !== "ok" || seen === undefined) return undefined;
  return { status: res.status, headers, body: Buffer.concat(seen) };
}

/** Joins the fleet's Redis: a client (the `redis` package) and the shared state on it. */
async function joinFleet(f: NonNullable<Resolved["fleet"]>) {
  const { createClient } = await import("redis").catch(() => {
    throw new ConfigError("gateway config", "fleet", f.prefix, "usable: install the redis package");
  });
  const { sharedState } = await import("../redis/index.ts");
  const client = createClient({ url: f.redis, disableOfflineQueue: true });
  client.on("error", () => {}); // decisions go local while Redis is away (rule 18)
  // Not awaited: a gateway starts with Redis away, deciding locally until it answers.
  client.connect().catch(() => {});
  const state = sharedState({ client, prefix: f.prefix, syncMs: f.syncMs });
  return {
    state,
    async leave() {
      state.close();
      await client.close().catch(() => {});
    },
  };
}

/** Starts a gateway with `config` (validated by name; keys resolved from the environment). */
export async function gateway(config: GatewayConfig | unknown): Promise<Gateway> {
  const first = resolveConfig(config);
  const fleet = first.fleet === undefined ? undefined : await joinFleet(first.fleet);
  const tele = first.otel ? await telemetry() : undefined;
  const gear: Gear = { fleet: fleet?.state, tele, transport: gatewayFetch() };
  let state = live(first, undefined, gear);
  const metrics = new GatewayMetrics();
  const idem = first.idempotency;
  const replays = idem === undefined ? undefined : new Replays(idem.ttlMs, idem.maxBytes);
  const books: Books = { metrics, runs: new Runs(), replays, telemetry: tele };
  const inFlight = new Set<Promise<void>>();
  const server: Server = createServer(
    { maxHeaderSize: 16_384, requestTimeout: 60_000 },
    (req, out) => {
      const done = handle(state, books, req, out).catch((error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        fail(out, wireOfPath(req.url ?? "/"), 500, "gateway_error", message);
      });
      inFlight.add(done);
      void done.finally(() => inFlight.delete(done));
    },
  );
  server.maxConnections = state.config.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(state.config.port, state.config.host, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(":") ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}`,
    metrics,
    reload(next) {
      state = live(resolveConfig(next), state, gear);
      server.maxConnections = state.config.maxConnections;
    },
    async close() {
      await new Promise<void>((r) => server.close(() => r()));
      await Promise.allSettled([...inFlight]);
      gear.transport.close(); // its idle keep-alive connections
      await fleet?.leave();
    },
  };
}
