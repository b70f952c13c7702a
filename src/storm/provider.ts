import type { Usage } from "../index.ts";
import { inTrigger, type ProviderSpec, type TriggerSpec } from "./scenarios.ts";
import {
  type RejectReason,
  SimHttpError,
  type SimProviderApi,
  type SimRequest,
  type World,
} from "./types.ts";

/** Whether key `k` is among the share of keys whose quota is spent (a stable hash). */
function spent(k: number, share: number): boolean {
  const h = Math.imul(k ^ 0x9e3779b9, 0x85ebca6b) >>> 0;
  return h / 4_294_967_296 < share;
}

interface Job {
  arrivedAt: number;
  request: SimRequest;
  signal: AbortSignal | undefined;
  resolve: (u: Usage) => void;
}

/**
 * A capacity-limited model provider: `maxConcurrent` requests in service, a FIFO queue of
 * `maxQueue` behind them, overflow rejected. Service time grows with tokens. During the
 * trigger window capacity can shrink, latency grow and a share of requests fail. A request
 * its client abandoned still occupies the provider until it finishes: the server does not
 * know, which is what lets a failure outlive its trigger (metastability).
 */
export class SimProvider implements SimProviderApi {
  readonly #spec: ProviderSpec;
  readonly #queue: Job[] = [];
  #queueHead = 0;
  #inService = 0;

  /** Time, the trouble, randomness and the meters, shared with the simulation. */
  readonly #w: World;

  constructor(world: World, spec: ProviderSpec) {
    this.#w = world;
    this.#spec = spec;
  }

  #inTrigger(now: number): boolean {
    return inTrigger(this.#w.trigger, now);
  }

  #capacity(now: number): number {
    const f = this.#inTrigger(now) ? (this.#w.trigger.capacityFactor ?? 1) : 1;
    return Math.max(1, Math.round(this.#spec.maxConcurrent * f));
  }

  call(request: SimRequest, signal?: AbortSignal): Promise<Usage> {
    const r = this.#w.draws.of(request.id);
    const tail = this.#spec.queueTail;
    if (tail === undefined) return this.#arrive(request, signal, r);
    const wait = this.#queueWait(tail, r);
    // Waiting at a replica before the provider takes it: a client that leaves meanwhile
    // sends nothing more, and is billed nothing.
    return this.#w.clock.sleep(wait, signal).then(() => this.#arrive(request, signal, r));
  }

  /** A request's wait before it starts: lognormal, and a slow replica's for some. */
  #queueWait(t: NonNullable<ProviderSpec["queueTail"]>, r: () => number): number {
    // Box-Muller: a standard normal from two uniforms.
    const z = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
    const slow = r() < t.slowShare ? t.slowMs : 0;
    return t.medianMs * Math.exp(t.sigma * z) + slow;
  }

  /** `r`: this arrival's draws. */
  #arrive(request: SimRequest, signal: AbortSignal | undefined, r: () => number): Promise<Usage> {
    const now = this.#w.clock.now();
    this.#w.meter.arrival(now);
    const t = this.#w.trigger;
    const inTrigger = this.#inTrigger(now);
    if (inTrigger && t.errorRate !== undefined && r() < t.errorRate)
      return this.#reject(request, t.errorStatus ?? 503, "injected");
    const limited = t.rateLimit && this.#rateLimited(now, t.rateLimit, inTrigger, request);
    if (limited) return limited;
    return new Promise<Usage>((resolve, reject) => {
      const job: Job = { arrivedAt: now, request, signal, resolve };
      if (this.#inService < this.#capacity(now)) this.#start(job);
      else if (this.#queue.length - this.#queueHead < this.#spec.maxQueue) this.#queue.push(job);
      else this.#reject(request, this.#spec.overflowStatus, "overflow").catch(reject);
    });
  }

  /** The key's request bucket, replenished continuously; its limit changes with the
   * trigger. */
  #bucket = { limit: 0, level: 0, perMs: 0, at: 0 };
  #rateLimited(
    now: number,
    limit: NonNullable<TriggerSpec["rateLimit"]>,
    inTrigger: boolean,
    request: SimRequest,
  ): Promise<never> | undefined {
    // A spent key stays spent: the same keys fail on every request (a hash, not a draw).
    if (inTrigger && limit.quotaShare !== undefined && spent(request.key ?? 0, limit.quotaShare))
      return this.#reject(request, 429, "quota");
    const b = this.#refill(now, inTrigger ? limit.perWindow : limit.usualPerWindow, limit.windowS);
    if (b === undefined) return undefined;
    if (b.level >= 1) {
      b.level -= 1;
      return undefined;
    }
    return this.#reject(
      request,
      429,
      "rate",
      Math.max(1, Math.ceil((1 - b.level) / b.perMs / 1000)),
    );
  }

  /** The bucket at `now` under `perWindow` (none: no limit). */
  #refill(now: number, perWindow: number | undefined, windowS: number) {
    if (perWindow === undefined) return undefined;
    const b = this.#bucket;
    if (b.limit !== perWindow) {
      const first = b.limit === 0;
      b.limit = perWindow;
      b.perMs = perWindow / (windowS * 1000);
      b.level = first ? perWindow : Math.min(b.level, perWindow);
      if (first) b.at = now;
    }
    b.level = Math.min(b.limit, b.level + (now - b.at) * b.perMs);
    b.at = now;
    return b;
  }

  /** What every answer says of the limit (OpenAI's headers), when there is one. */
  #headers(): Record<string, string> | undefined {
    const t = this.#w.trigger.rateLimit;
    if (t === undefined) return undefined;
    const now = this.#w.clock.now();
    const b = this.#refill(now, this.#inTrigger(now) ? t.perWindow : t.usualPerWindow, t.windowS);
    if (b === undefined) return undefined;
    const resetMs = Math.ceil((b.limit - b.level) / b.perMs);
    return {
      "x-ratelimit-limit-requests": String(b.limit),
      "x-ratelimit-remaining-requests": String(Math.floor(b.level)),
      "x-ratelimit-reset-requests":
        resetMs < 1000 ? `${resetMs}ms` : `${(resetMs / 1000).toFixed(2)}s`,
    };
  }

  #reject(
    request: SimRequest,
    status: number,
    reason: RejectReason,
    retryAfterS = this.#spec.retryAfterS,
  ): Promise<never> {
    this.#w.meter.rejected(this.#w.clock.now(), reason);
    const headers = this.#headers();
    const error = new SimHttpError(status, reason, retryAfterS, headers);
    return this.#w.clock.sleep(this.#spec.rejectLatencyMs).then(() => {
      if (headers !== undefined) request.onHeaders?.(headers);
      throw error;
    });
  }

  #start(job: Job) {
    const now = this.#w.clock.now();
    this.#inService++;
    this.#w.meter.inService(now, this.#inService, this.#queue.length - this.#queueHead);
    const s = this.#spec;
    const slow = this.#inTrigger(now) ? (this.#w.trigger.latencyFactor ?? 1) : 1;
    const ttft = (s.ttftMs + job.request.inputTokens * s.perInputTokenMs) * slow;
    const ms = ttft + job.request.outputTokens * s.perOutputTokenMs * slow;
    const first = job.request.onFirstToken;
    if (first !== undefined) this.#w.clock.schedule(ttft, first);
    this.#w.clock.schedule(ms, () => this.#finish(job));
  }

  #finish(job: Job) {
    this.#inService--;
    const usage = { inputTokens: job.request.inputTokens, outputTokens: job.request.outputTokens };
    this.#w.meter.served(job.arrivedAt, usage);
    const headers = this.#headers();
    if (headers !== undefined) job.request.onHeaders?.(headers);
    job.resolve(usage);
    this.#next();
    this.#w.meter.inService(
      this.#w.clock.now(),
      this.#inService,
      this.#queue.length - this.#queueHead,
    );
  }

  #next() {
    const now = this.#w.clock.now();
    while (this.#queueHead < this.#queue.length && this.#inService < this.#capacity(now)) {
      this.#start(this.#queue[this.#queueHead++]!);
    }
    if (this.#queueHead > 1024 && this.#queueHead * 2 > this.#queue.length) {
      this.#queue.splice(0, this.#queueHead);
      this.#queueHead = 0;
    }
  }
}
