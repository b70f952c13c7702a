import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { systemClock } from "../../index.ts";
import { opt, parseOptions } from "../../internal.ts";
import { countTokens } from "../fake-model.ts";
import { mulberry32 } from "../random.ts";
import { agentTurn } from "./agent.ts";
import { CONVERSATION_ITEMS, Conversations, conversationOf } from "./conversations.ts";
import { type Extra, extraFor } from "./extras.ts";
import {
  DEFAULT_MESSAGES,
  DIALECTS,
  defaultErrorName,
  ERROR_STATUS,
  openaiResponses,
  STREAM_IDS,
  type WireFormat,
} from "./providers.ts";
import { ServerRateLimits } from "./ratelimit.ts";
import { type FaultRule, type FaultScript, parseScript, type Route } from "./script.ts";
import { type Arrival, emptyStats, type FaultStats, settle } from "./stats.ts";
import { SideEffectLedger } from "./tools.ts";

/** Options of `startFaultServer`. */
export interface FaultServerOptions {
  script?: FaultScript;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Loopback only: "127.0.0.1" (default), "::1" or "localhost". */
  host?: "127.0.0.1" | "::1" | "localhost";
  /** Larger request bodies get a 413. Default 1 MiB. */
  maxBodyBytes?: number;
  /** Open connections at once; more are refused. Default 512. */
  maxConnections?: number;
  /** A request (headers and body) must arrive within this. Default 30 000 ms. */
  requestTimeoutMs?: number;
}

/** A running fault server. */
export interface FaultServer {
  /** e.g. http://127.0.0.1:43210 */
  readonly url: string;
  readonly port: number;
  /** When it started (epoch ms): the timeline's `at` and `closedAt` count from it. */
  readonly startedAt: number;
  /** A snapshot of what the server received, billed and executed. */
  stats(): FaultStats;
  /** Replaces the script (validated); rule counters and the time window restart. */
  setScript(script: FaultScript): void;
  /** Zeroes the stats (requests, billing, timeline, tool ledger). */
  resetStats(): void;
  /** Stops listening and drops every open connection. */
  close(): Promise<void>;
}

const MAX_TIMELINE = 200_000;
/** Request bodies nested deeper than this are refused (the walks below recurse). */
const MAX_DEPTH = 64;

/** True when `value` nests deeper than `max` (counted without recursion). */
function depthOver(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (d >= max) return true;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return false;
}

const LOOPBACK_HOST = /^(?:127\.0\.0\.1|localhost|\[::1\])(?::(\d+))?$/i;

/**
 * A browser page or a DNS-rebinding attack reaches a developer's loopback server with a
 * foreign Host or Origin: both must name this machine (and the Host, this port).
 */
function refuseForeign(req: IncomingMessage, port: number): string | undefined {
  const host = LOOPBACK_HOST.exec(req.headers.host ?? "");
  if (!host || (host[1] !== undefined && Number(host[1]) !== port))
    return `Host ${JSON.stringify(req.headers.host ?? "")} is not this loopback server`;
  const origin = req.headers.origin;
  if (origin === undefined) return undefined;
  let originHost = "";
  try {
    originHost = new URL(origin).host;
  } catch {}
  return LOOPBACK_HOST.test(originHost)
    ? undefined
    : `Origin ${JSON.stringify(origin)} is not allowed`;
}
const GEMINI_PATH =
  /^\/v1(?:beta|alpha)?\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;
const TOOL_PATH = /^\/tools\/([A-Za-z0-9_.-]{1,64})$/;

type Parsed = ReturnType<typeof parseScript>;

interface Request {
  route: Route;
  /** Its input tokens: the words of its messages. */
  inputTokens: number;
  /** The wire format: the route's, or OpenAI's Responses API on the openai route. */
  dialect: WireFormat | undefined;
  model: string;
  tool?: string;
  stream: boolean;
  includeUsage: boolean;
  body: unknown;
  key?: string;
  /** An endpoint beside chat (embeddings, token counts, batches, ...). */
  extra?: Extra;
  /** The rate-limit headers every answer to it carries. */
  limitHeaders?: Record<string, string>;
  /** The retries so far the client says it is on (`x-stainless-retry-count`, else
   * `x-retry-attempt` less one). */
  retries?: number;
}

type StreamChunk =
  | { word: string }
  | { piece: (model: string) => string }
  | { frames: (model: string) => string[] };

/** A rule's tool calls as stream chunks: frames that open and close each call (not counted),
 * and its arguments in pieces of 8 characters (each one counted, like a word). */
function toolChunks(dialect: WireFormat, rule: FaultRule): StreamChunk[] {
  const tool = dialect.tool;
  if (tool === undefined) return [];
  return (rule.toolCalls ?? []).flatMap((call, i): StreamChunk[] => [
    { frames: (m: string) => tool.open(m, i, call.name, call.id) },
    ...(call.arguments.match(/[\s\S]{1,8}/g) ?? []).map((piece) => ({
      piece: (m: string) => tool.args(m, i, piece),
    })),
    { frames: (m: string) => tool.close(m, i, call) },
  ]);
}

/** The text a request asks the model to go on from: a last assistant message (Anthropic's
 * prefill; on the OpenAI route only with `prefix: true`, as DeepSeek and Mistral take it). */
function prefillOf(r: Request): string | undefined {
  const messages = (r.body as { messages?: unknown })?.messages;
  const last = Array.isArray(messages)
    ? (messages.at(-1) as Record<string, unknown> | undefined)
    : undefined;
  if (last?.role !== "assistant" || (r.route === "openai" && last.prefix !== true))
    return undefined;
  if (typeof last.content === "string") return last.content;
  if (!Array.isArray(last.content)) return undefined;
  return last.content.map((b) => (typeof b?.text === "string" ? b.text : "")).join("");
}

/** A request's own abort: fires when its client goes away or the server closes. */
function requestSignal(res: ServerResponse, server: AbortSignal): AbortSignal {
  const ac = new AbortController();
  res.on("close", () => ac.abort());
  const onServer = () => ac.abort();
  server.addEventListener("abort", onServer, { once: true });
  res.on("close", () => server.removeEventListener("abort", onServer));
  return ac.signal;
}

const sleep = (ms: number, signal: AbortSignal) =>
  ms > 0 ? systemClock.sleep(ms, signal) : Promise.resolve();

/** The text of a request's messages (what `content`, `text` and `system` hold), whose
 * words are its input tokens. Roles, ids and other fields do not count. */
function inputText(route: Route, body: Record<string, unknown>): string {
  const parts: string[] = [];
  const walk = (x: unknown, counted: boolean) => {
    if (typeof x === "string") {
      if (counted) parts.push(x);
    } else if (Array.isArray(x)) {
      for (const item of x) walk(item, counted);
    } else if (x !== null && typeof x === "object") {
      for (const [k, v] of Object.entries(x)) walk(v, counted || k === "content" || k === "text");
    }
  };
  if (route === "gemini") {
    walk(body.contents, false);
    walk(body.systemInstruction, true);
  } else {
    walk(body.messages, false);
    walk(body.system, true);
    // The Responses API: `input` (a string or messages) and `instructions`.
    walk(body.input, typeof body.input === "string");
    walk(body.instructions, true);
  }
  return parts.join(" ");
}

class FaultServerImpl {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #closing = new AbortController();
  readonly #maxBody: number;
  readonly startedAt = Date.now();
  readonly #startedAt = this.startedAt;
  #script!: Parsed;
  #limits: ServerRateLimits | undefined;
  #random!: () => number;
  #uses!: number[];
  #counts!: Map<Route, number>;
  #scriptAt!: number;
  #stats: FaultStats = emptyStats();
  #streams = 0;
  #ledger = new SideEffectLedger(this.#stats.tools);
  readonly #conversations = new Conversations();
  #arrivalsLastSecond: number[] = [];

  constructor(server: Server, script: FaultScript | undefined, maxBody: number) {
    this.#server = server;
    this.#maxBody = maxBody;
    this.setScript(script ?? {});
    server.on("connection", (s) => {
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
    });
    server.on("request", (req, res) => {
      this.#handle(req, res).catch((error) => {
        if (!res.headersSent)
          this.#send(res, 500, { error: { message: String(error?.message ?? error) } });
        else res.destroy();
      });
    });
  }

  #port(): number {
    const address = this.#server.address();
    return typeof address === "object" && address ? address.port : 0;
  }

  setScript(script: FaultScript) {
    this.#script = parseScript(script);
    this.#random = mulberry32(this.#script.seed);
    this.#uses = this.#script.rules.map(() => 0);
    this.#counts = new Map();
    this.#scriptAt = Date.now();
    const limits = this.#script.rateLimit;
    this.#limits = limits === undefined ? undefined : new ServerRateLimits(limits, this.#scriptAt);
  }

  stats(): FaultStats {
    return { ...structuredClone(this.#stats), conversations: this.#conversations.turns() };
  }

  resetStats() {
    const inFlight = this.#stats.inFlight;
    this.#stats = emptyStats();
    this.#stats.inFlight = inFlight;
    this.#ledger = new SideEffectLedger(this.#stats.tools);
    this.#conversations.clear();
  }

  async close() {
    this.#closing.abort();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }

  async #handle(req: IncomingMessage, res: ServerResponse) {
    const refused = refuseForeign(req, this.#port());
    if (refused !== undefined) return this.#send(res, 403, { error: { message: refused } });
    let path: string;
    try {
      path = new URL(req.url ?? "/", "http://fault.local").pathname;
    } catch {
      return this.#send(res, 400, { error: { message: "malformed request URL" } });
    }
    if (path === "/__stats" && req.method === "GET") return this.#send(res, 200, this.stats());
    if (path === "/__reset" && req.method === "POST") {
      this.resetStats();
      return this.#send(res, 200, { ok: true });
    }
    const items = req.method === "GET" ? CONVERSATION_ITEMS.exec(path) : null;
    if (items !== null) return this.#send(res, 200, this.#conversations.list(items[1]!));
    const target = routeOf(req.method, path);
    if ("status" in target) return this.#send(res, target.status, target.body);
    const raw = await this.#readBody(req, res);
    if (raw === undefined) return;
    const body = parseBody(raw, target.route);
    if ("status" in body) return this.#send(res, body.status, body.body);
    if (target.route === undefined) return this.#scriptSent(req, res, body.json);
    await this.#serve(requestOf(req, target as Target & { route: Route }, body.json), res);
  }

  /** A script sent to /__script. */
  #scriptSent(req: IncomingMessage, res: ServerResponse, body: unknown) {
    if (!String(req.headers["content-type"] ?? "").startsWith("application/json"))
      return this.#send(res, 415, { error: { message: "a script is sent as application/json" } });
    try {
      this.setScript(body as FaultScript);
    } catch (error) {
      return this.#send(res, 400, { error: { message: (error as Error).message } });
    }
    return this.#send(res, 200, { ok: true });
  }

  #readBody(req: IncomingMessage, res: ServerResponse): Promise<string | undefined> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let over = false;
      req.on("data", (c: Buffer) => {
        size += c.length;
        if (size > this.#maxBody) {
          if (!over) {
            over = true;
            res.setHeader("connection", "close");
            this.#send(res, 413, {
              error: { message: `request body over ${this.#maxBody} bytes` },
            });
            resolve(undefined);
          }
          return;
        }
        chunks.push(c);
      });
      req.on("end", () => {
        if (!over) resolve(Buffer.concat(chunks).toString("utf8"));
      });
      req.on("error", () => resolve(undefined));
    });
  }

  #send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
    if (res.headersSent || res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  }

  #match(r: Request, now: number, arrival: Arrival): FaultRule | undefined {
    const index = this.#counts.get(r.route) ?? 0;
    const elapsed = now - this.#scriptAt;
    const rules = this.#script.rules;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]!;
      if (rule.route !== undefined && rule.route !== r.route) continue;
      if (rule.tool !== undefined && rule.tool !== r.tool) continue;
      if (rule.model !== undefined && rule.model !== r.model) continue;
      if (rule.requests && (index < rule.requests[0] || index > rule.requests[1])) continue;
      if (rule.window && (elapsed < rule.window[0] || elapsed >= rule.window[1])) continue;
      if (rule.times !== undefined && this.#uses[i]! >= rule.times) continue;
      if (rule.probability !== undefined && this.#random() >= rule.probability) continue;
      this.#uses[i]!++;
      arrival.rule = i;
      return rule;
    }
    return undefined;
  }

  /** Overflow of the capacity limit, if any: the status to reject with. */
  #overflow(r: Request, now: number): number | undefined {
    const cap = this.#script.capacity;
    if (cap === undefined) return undefined;
    const window = this.#arrivalsLastSecond;
    while (window.length > 0 && window[0]! <= now - 1000) window.shift();
    const full =
      (cap.maxConcurrent !== undefined && this.#stats.inFlight >= cap.maxConcurrent) ||
      (cap.maxPerSecond !== undefined && window.length >= cap.maxPerSecond);
    if (!full) {
      window.push(now);
      return undefined;
    }
    return cap.status ?? (r.route === "anthropic" ? 529 : 503);
  }

  /** An arrival's connection closed: when, and (if nothing else said) that it was cut. */
  #closed(stats: FaultStats, arrival: Arrival): void {
    arrival.closedAt = Date.now() - this.#startedAt;
    settle(stats, arrival, "aborted");
  }

  async #serve(r: Request, res: ServerResponse) {
    const stats = this.#stats;
    const now = Date.now();
    this.#counts.set(r.route, (this.#counts.get(r.route) ?? 0) + 1);
    stats.requests++;
    const routeStats = (stats.byRoute[r.route] ??= { requests: 0, byOutcome: {} });
    routeStats.requests++;
    const arrival: Arrival = {
      at: now - this.#startedAt,
      route: r.route,
      ...(r.model && { model: r.model }),
      ...(r.tool && { tool: r.tool }),
      ...(r.retries !== undefined && { retries: r.retries }),
    };
    if (stats.timeline.length < MAX_TIMELINE) stats.timeline.push(arrival);
    res.on("close", () => this.#closed(stats, arrival));

    const overflow = this.#overflow(r, now);
    if (overflow !== undefined) {
      const retryAfter = this.#script.capacity?.retryAfter;
      return this.#error(r, res, arrival, {
        status: overflow,
        ...(retryAfter !== undefined && { retryAfter }),
      });
    }
    if (this.#limits !== undefined && r.route !== "tools" && r.extra === undefined) {
      const charge = this.#limits.charge(r.route, r.inputTokens + allowance(r.body), now);
      r.limitHeaders = charge.headers;
      if (charge.over)
        return this.#error(r, res, arrival, {
          status: 429,
          error: "rate_limit",
          retryAfter: charge.retryAfterS,
        });
    }
    stats.inFlight++;
    stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight);
    res.on("close", () => this.#stats.inFlight--);
    const signal = requestSignal(res, this.#closing.signal);
    const rule = this.#ruleFor(r, now, arrival);
    try {
      if (rule.reset) {
        settle(stats, arrival, "reset");
        res.socket?.resetAndDestroy?.() ?? res.socket?.destroy();
        return;
      }
      if (r.route === "tools") return await this.#tool(r, res, arrival, rule, signal);
      this.#appendTurn(r, rule);
      await sleep(rule.headersDelayMs ?? 0, signal);
      if (answersError(r, rule)) return this.#error(r, res, arrival, rule);
      if (r.extra) return this.#extra(r, r.extra, res, arrival);
      if (r.stream) return await this.#stream(r, res, arrival, rule, signal);
      return await this.#json(r, res, arrival, rule, signal);
    } catch (error) {
      if (signal.aborted) return; // the client left or the server is closing
      throw error;
    }
  }

  /** The rule that shapes the answer; the scripted agent's model decides what its turn
   * says (the rules still fault it). */
  #ruleFor(r: Request, now: number, arrival: Arrival): FaultRule {
    const matched = this.#match(r, now, arrival) ?? {};
    const agent = this.#script.agent;
    return agent !== undefined && r.dialect === DIALECTS.openai
      ? { ...matched, ...agentTurn(agent, r.body) }
      : matched;
  }

  /** A Responses request naming a stored conversation appends its turn as it arrives
   * (an error answer appends nothing). */
  #appendTurn(r: Request, rule: FaultRule): void {
    if (r.dialect !== openaiResponses || (rule.status !== undefined && rule.status >= 400)) return;
    const id = conversationOf(r.body);
    if (id === undefined) return;
    const input = (r.body as { input?: unknown }).input;
    const text = rule.text ?? this.#script.text ?? "";
    this.#conversations.append(
      id,
      typeof input === "string" ? input : JSON.stringify(input),
      text,
      "resp_fault",
    );
  }

  #errorHeaders(rule: FaultRule): Record<string, string> {
    const h: Record<string, string> = {};
    if (rule.retryAfter !== undefined) h["retry-after"] = String(rule.retryAfter);
    if (rule.retryAfterDate !== undefined)
      h["retry-after"] = new Date(Date.now() + rule.retryAfterDate * 1000).toUTCString();
    if (rule.retryAfterMs !== undefined) h["retry-after-ms"] = String(rule.retryAfterMs);
    if (rule.shouldRetry !== undefined) h["x-should-retry"] = String(rule.shouldRetry);
    return h;
  }

  #error(r: Request, res: ServerResponse, arrival: Arrival, rule: FaultRule) {
    const status = rule.status!;
    const name = rule.error ?? defaultErrorName(status);
    const message = rule.message ?? DEFAULT_MESSAGES[name];
    const says = status < 300 ? ERROR_STATUS[name] : status; // what the body's own codes say
    const body =
      r.route === "tools"
        ? {
            status: "error",
            error: { code: toolCode(status), message, retryable: status === 429 || status >= 500 },
          }
        : r.dialect!.error(says, name, message, rule.retryAfter);
    settle(this.#stats, arrival, String(status));
    this.#send(res, status, body, { ...r.limitHeaders, ...this.#errorHeaders(rule) });
  }

  #extra(r: Request, extra: Extra, res: ServerResponse, arrival: Arrival) {
    const { body, contentType } = extra.answer(r.inputTokens, r.model || "fault-model");
    settle(this.#stats, arrival, "200");
    if (!Buffer.isBuffer(body)) return this.#send(res, 200, body);
    res.writeHead(200, {
      "content-type": contentType ?? "application/octet-stream",
      "content-length": body.length,
    });
    res.end(body);
  }

  #bill(input: number, output: number, arrival: Arrival) {
    this.#stats.billed.inputTokens += input;
    this.#stats.billed.outputTokens += output;
    arrival.billed = (arrival.billed ?? 0) + input + output;
  }

  async #json(
    r: Request,
    res: ServerResponse,
    arrival: Arrival,
    rule: FaultRule,
    signal: AbortSignal,
  ) {
    const dialect = r.dialect!;
    const text = rule.text ?? this.#script.text;
    const input = r.inputTokens;
    const output = countTokens(text);
    await sleep((rule.tokenLatencyMs ?? 0) * output, signal);
    const fault = rule.stream;
    if (fault?.action === "stall" || fault?.action === "cut") {
      // Headers, then nothing (stall) or a dropped connection (cut).
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"id":');
      this.#bill(input, 0, arrival);
      settle(this.#stats, arrival, fault.action);
      if (fault.action === "cut") cut(res);
      return;
    }
    this.#bill(input, output, arrival);
    settle(this.#stats, arrival, "200");
    const answer = dialect.json(
      rule.servedBy ?? (r.model || "fault-model"),
      text,
      input,
      output,
      rule.finish,
      rule.refusal,
      rule.toolCalls,
    );
    this.#send(res, 200, answer, r.limitHeaders);
  }

  async #stream(
    r: Request,
    res: ServerResponse,
    arrival: Arrival,
    rule: FaultRule,
    signal: AbortSignal,
  ) {
    const dialect = r.dialect!;
    const model = rule.servedBy ?? (r.model || "fault-model");
    const input = r.inputTokens;
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
      ...r.limitHeaders,
    });
    this.#bill(input, 0, arrival);
    const n = (++this.#streams).toString(36);
    const write = (f: string) => res.write(f.replace(STREAM_IDS, `"$1-${n}"`));
    for (const f of dialect.start(model, input)) write(f);
    const { chunks, checkpoint } = this.#chunksOf(r, rule);
    const fault = rule.stream;
    let sent = 0;
    for (const c of chunks) {
      if ("frames" in c) {
        for (const f of c.frames(model)) write(f);
        continue;
      }
      if (fault && sent === fault.after) break;
      await sleep(rule.tokenLatencyMs ?? 0, signal);
      sent++;
      this.#bill(0, 1, arrival);
      write(
        "piece" in c ? c.piece(model) : dialect.delta(model, c.word, sent, input, checkpoint(sent)),
      );
    }
    if (fault) return this.#fail(res, arrival, dialect, fault, signal);
    const tools = dialect.tool !== undefined && (rule.toolCalls?.length ?? 0) > 0;
    const stop = rule.finish === "length" ? "length" : tools ? "tools" : undefined;
    for (const f of dialect.end(model, input, sent, r.includeUsage, stop)) write(f);
    settle(this.#stats, arrival, "200");
    res.end();
  }

  /** What a stream sends: the answer's words (after a prefill it goes on from, or a
   * Gemini checkpoint it resumes after) and the rule's tool calls; and the checkpoint
   * token after each word, where the script asks for them. */
  #chunksOf(r: Request, rule: FaultRule) {
    const full = rule.text ?? this.#script.text;
    // An assistant prefill (Anthropic) or prefix (OpenAI-compatible): go on from it.
    const prefill = prefillOf(r);
    const words =
      prefill !== undefined && prefill !== "" && full.startsWith(prefill)
        ? (full.slice(prefill.length).match(/\s*\S+\s*/g) ?? [])
        : (full.match(/\S+\s*/g) ?? []);
    // Gemini's resumable streams: a checkpoint after each word, a resume skips what it saw.
    const checkpoints = this.#script.checkpoints === true && r.route === "gemini";
    const resumed = /^ct-(\d+)$/.exec(
      String((r.body as { continuationToken?: unknown })?.continuationToken),
    );
    const skip = checkpoints && resumed ? Math.min(Number(resumed[1]), words.length) : 0;
    const chunks: StreamChunk[] = [
      ...words.slice(skip).map((word) => ({ word })),
      ...toolChunks(r.dialect!, rule),
    ];
    const checkpoint = (sent: number) => (checkpoints ? `ct-${skip + sent}` : undefined);
    return { chunks, checkpoint };
  }

  /** The stream's fault: a cut, an in-band error event, garbage, an end with no end of the
   * answer, or a stall (kept warm if asked). */
  async #fail(
    res: ServerResponse,
    arrival: Arrival,
    dialect: WireFormat,
    fault: NonNullable<FaultRule["stream"]>,
    signal: AbortSignal,
  ) {
    if (fault.action === "cut") {
      settle(this.#stats, arrival, "cut");
      cut(res);
    } else if (fault.action === "error") {
      const name = fault.error ?? "overloaded";
      settle(this.#stats, arrival, "error-event");
      res.end(dialect.inBand(name, DEFAULT_MESSAGES[name]));
    } else if (fault.action === "garbage") {
      settle(this.#stats, arrival, "garbage");
      res.end("data: <html>502 Bad Gateway</html>\n\n");
    } else if (fault.action === "end") {
      // A clean end of the body with no end of the answer (no `[DONE]`, no finish event):
      // a proxy or a provider that dropped the rest and closed politely.
      settle(this.#stats, arrival, "ended");
      res.end();
    } else {
      settle(this.#stats, arrival, "stall");
      if (fault.keepaliveMs !== undefined)
        await this.#keepWarm(res, dialect, fault.keepaliveMs, signal);
    }
  }

  /** A stalled stream that still looks alive: keepalives until the client leaves. */
  async #keepWarm(res: ServerResponse, dialect: WireFormat, everyMs: number, signal: AbortSignal) {
    const frame = dialect.keepalive?.() ?? ": keepalive\n\n";
    while (!signal.aborted && !res.destroyed) {
      await sleep(everyMs, signal).catch(() => {});
      if (!signal.aborted && !res.destroyed) res.write(frame);
    }
  }

  #toolRefusal(
    res: ServerResponse,
    arrival: Arrival,
    status: number,
    code: string,
    message: string,
    retryable: boolean,
  ) {
    settle(this.#stats, arrival, String(status));
    this.#send(res, status, { status: "error", error: { code, message, retryable } });
  }

  async #tool(
    r: Request,
    res: ServerResponse,
    arrival: Arrival,
    rule: FaultRule,
    signal: AbortSignal,
  ) {
    const tool = r.tool!;
    if (rule.status !== undefined && !rule.afterWork) {
      await sleep(rule.headersDelayMs ?? 0, signal);
      return this.#error(r, res, arrival, rule); // rejected before any work
    }
    const verdict = this.#ledger.check(r.key, tool, r.body);
    if (verdict.kind === "mismatch") {
      return this.#toolRefusal(
        res,
        arrival,
        422,
        "IDEMPOTENCY_MISMATCH",
        "this Idempotency-Key was used with a different body",
        false,
      );
    }
    if (verdict.kind === "conflict") {
      return this.#toolRefusal(
        res,
        arrival,
        409,
        "IN_PROGRESS",
        "a request with this Idempotency-Key is still running",
        true,
      );
    }
    if (verdict.kind === "replay") {
      settle(this.#stats, arrival, "200");
      return this.#send(
        res,
        200,
        { ...(verdict.result as object), replayed: true },
        { "idempotent-replayed": "true" },
      );
    }
    // The work happens whether or not the client is still there: the server cannot know.
    this.#ledger.begin(r.key, tool, r.body);
    if (rule.workMs) await new Promise((resolve) => setTimeout(resolve, rule.workMs).unref());
    const result = this.#ledger.execute(r.key, tool, r.body);
    await sleep(rule.headersDelayMs ?? 0, signal);
    if (rule.status !== undefined) return this.#error(r, res, arrival, rule);
    settle(this.#stats, arrival, "200");
    this.#send(res, 200, { ...(result as object), replayed: false });
  }
}

/** Drops the connection once what was written has left: the client sees a cut body. */
/** The output allowance a request asks for (what a provider's token limit counts). */
function allowance(body: unknown): number {
  const b = (body ?? {}) as Record<string, unknown>;
  const g = b.generationConfig as Record<string, unknown> | undefined;
  for (const n of [b.max_tokens, b.max_completion_tokens, b.max_output_tokens, g?.maxOutputTokens])
    if (typeof n === "number" && n > 0) return n;
  return 0;
}

function cut(res: ServerResponse) {
  res.write("", () => res.destroy());
}

function toolCode(status: number): string {
  if (status === 429) return "RATE_LIMITED";
  if (status === 503 || status === 502 || status === 504) return "UNAVAILABLE";
  if (status === 400 || status === 422) return "INVALID_ARGUMENT";
  if (status === 401 || status === 403) return "PERMISSION_DENIED";
  if (status === 404) return "NOT_FOUND";
  return "INTERNAL";
}

/** Where a request goes: a provider's route (with its model, tool and stream flag from
 * the path), an extra endpoint, the script endpoint (no route), or an error answer. */
interface Target {
  route: Route | undefined;
  model: string;
  tool?: string;
  geminiStream: boolean;
  responsesApi: boolean;
  extra: Extra | undefined;
}
type Refused = { status: number; body: unknown };

function routeOf(method: string | undefined, path: string): Target | Refused {
  const t: Target = {
    route: undefined,
    model: "",
    geminiStream: false,
    responsesApi: false,
    extra: extraFor(method, path),
  };
  const gm = GEMINI_PATH.exec(path);
  const tm = TOOL_PATH.exec(path);
  if (t.extra) t.route = t.extra.route;
  else if (path === "/v1/chat/completions") t.route = "openai";
  else if (path === "/v1/responses") {
    t.route = "openai";
    t.responsesApi = true;
  } else if (path === "/v1/messages") t.route = "anthropic";
  else if (gm) {
    t.route = "gemini";
    try {
      t.model = decodeURIComponent(gm[1]!);
    } catch {
      return {
        status: 400,
        body: DIALECTS.gemini.error(400, "bad_request", "malformed model name"),
      };
    }
    t.geminiStream = gm[2] === "streamGenerateContent";
  } else if (tm) {
    t.route = "tools";
    t.tool = tm[1]!;
  } else if (path !== "/__script") {
    const error = { message: `no route ${method} ${path}`, type: "not_found_error" };
    return { status: 404, body: { error } };
  }
  if (method !== "POST" && t.extra === undefined)
    return { status: 405, body: { error: { message: `${method} not allowed` } } };
  return t;
}

/** The body as JSON, or the route's own 400 for one that is not (or is too deep). */
function parseBody(raw: string, route: Route | undefined): { json: unknown } | Refused {
  try {
    const json = raw.length === 0 ? {} : JSON.parse(raw);
    if (depthOver(json, MAX_DEPTH)) throw new RangeError("too deep");
    return { json };
  } catch (error) {
    const message =
      error instanceof RangeError
        ? `request body nested deeper than ${MAX_DEPTH} levels`
        : "malformed JSON in request body";
    if (route === undefined || route === "tools")
      return { status: 400, body: { error: { code: "INVALID_ARGUMENT", message } } };
    return { status: 400, body: DIALECTS[route].error(400, "bad_request", message) };
  }
}

/** The request as the server serves it. */
function requestOf(req: IncomingMessage, t: Target & { route: Route }, body: unknown): Request {
  const route = t.route;
  const b = (body ?? {}) as Record<string, unknown>;
  const model =
    route === "openai" || route === "anthropic"
      ? typeof b.model === "string"
        ? b.model
        : ""
      : t.model;
  const key = req.headers["idempotency-key"];
  const text = typeof b.input === "string" ? b.input : inputText(route, b);
  return {
    route,
    inputTokens: route === "tools" ? 0 : countTokens(text),
    dialect: route === "tools" ? undefined : t.responsesApi ? openaiResponses : DIALECTS[route],
    model,
    ...(t.tool !== undefined && { tool: t.tool }),
    stream: route === "gemini" ? t.geminiStream : b.stream === true,
    includeUsage:
      (b.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true,
    body,
    ...(typeof key === "string" && key !== "" && { key }),
    ...(t.extra && { extra: t.extra }),
    ...retriesOf(req),
  };
}

/** The retry number a request says it is: what shows a layer that retries unseen. */
function retriesOf(req: IncomingMessage): { retries?: number } {
  const stainless = Number(req.headers["x-stainless-retry-count"]);
  if (Number.isInteger(stainless) && stainless >= 0) return { retries: stainless };
  const attempt = Number(req.headers["x-retry-attempt"]);
  return Number.isInteger(attempt) && attempt >= 1 ? { retries: attempt - 1 } : {};
}

const LOOPBACK = ["127.0.0.1", "::1", "localhost"] as const;

const OPTIONS = {
  script: opt.any<FaultServerOptions["script"]>(), // checked by parseScript
  port: opt.int({ max: 65_535, default: 0, allowed: "an integer from 0 to 65535" }),
  host: opt.oneOf(LOOPBACK, "127.0.0.1"),
  maxBodyBytes: opt.int({ min: 1, default: 1 << 20 }),
  maxConnections: opt.int({ min: 1, default: 512 }),
  requestTimeoutMs: opt.int({ min: 100, max: 3_600_000, default: 30_000 }),
};

/** Starts the fault server on loopback. */
export async function startFaultServer(options: FaultServerOptions = {}): Promise<FaultServer> {
  const o = parseOptions("startFaultServer", OPTIONS, options);
  const { host, port } = o;
  const maxBody = o.maxBodyBytes;
  const requestTimeout = o.requestTimeoutMs;
  // Slow-header and slow-body clients are cut; a flood of connections is refused.
  const server = createServer({
    keepAliveTimeout: 1000,
    requestTimeout,
    headersTimeout: Math.min(10_000, requestTimeout),
    // Node checks those timeouts on this interval (30 s by default).
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, requestTimeout / 4)),
  });
  server.maxConnections = o.maxConnections;
  const impl = new FaultServerImpl(server, options.script, maxBody);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === "object" && address ? address.port : port;
  const urlHost = host === "::1" ? "[::1]" : host;
  return {
    url: `http://${urlHost}:${bound}`,
    port: bound,
    startedAt: impl.startedAt,
    stats: () => impl.stats(),
    setScript: (s) => impl.setScript(s),
    resetStats: () => impl.resetStats(),
    close: () => impl.close(),
  };
}

/** Whether a rule answers an error: a 4xx or 5xx status, or a 2xx with `error` for a JSON
 * request (the error's body in a success status, as gateways send it). */
function answersError(r: Request, rule: FaultRule): boolean {
  if (rule.status === undefined) return false;
  return rule.status >= 400 || (rule.error !== undefined && !r.stream && rule.status < 300);
}
