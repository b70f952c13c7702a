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
    const now = this.#w.clock.now();
    this.#w.meter.arrival(now);
    const t = this.#w.trigger;
    if (this.#inTrigger(now)) {
      if (t.errorRate !== undefined && this.#w.random() < t.errorRate)
        return this.#reject(t.errorStatus ?? 503, "injected");
      const limited = t.rateLimit && this.#rateLimited(now, t.rateLimit, request.key);
      if (limited) return limited;
    }
    return new Promise<Usage>((resolve, reject) => {
      const job: Job = { arrivedAt: now, request, signal, resolve };
      if (this.#inService < this.#capacity(now)) this.#start(job);
      else if (this.#queue.length - this.#queueHead < this.#spec.maxQueue) this.#queue.push(job);
      else this.#reject(this.#spec.overflowStatus, "overflow").catch(reject);
    });
  }

  /** A fixed-window rate limit (and spent keys), as providers' RPM limits behave. */
  #window = { start: Number.NEGATIVE_INFINITY, used: 0 };
  #rateLimited(
    now: number,
    limit: NonNullable<TriggerSpec["rateLimit"]>,
    key = 0,
  ): Promise<never> | undefined {
    // A spent key stays spent: the same keys fail on every request (a hash, not a draw).
    if (limit.quotaShare !== undefined && spent(key, limit.quotaShare))
      return this.#reject(429, "quota");
    const width = limit.windowS * 1000;
    const start = Math.floor(now / width) * width;
    if (start !== this.#window.start) this.#window = { start, used: 0 };
    if (this.#window.used < limit.perWindow) {
      this.#window.used++;
      return undefined;
    }
    return this.#reject(429, "rate", Math.max(1, Math.ceil((start + width - now) / 1000)));
  }

  #reject(
    status: number,
    reason: RejectReason,
    retryAfterS = this.#spec.retryAfterS,
  ): Promise<never> {
    this.#w.meter.rejected(this.#w.clock.now(), reason);
    const error = new SimHttpError(status, reason, retryAfterS);
    return this.#w.clock.sleep(this.#spec.rejectLatencyMs).then(() => {
      throw error;
    });
  }

  #start(job: Job) {
    const now = this.#w.clock.now();
    this.#inService++;
    this.#w.meter.inService(now, this.#inService, this.#queue.length - this.#queueHead);
    const s = this.#spec;
    const slow = this.#inTrigger(now) ? (this.#w.trigger.latencyFactor ?? 1) : 1;
    const ms =
      (s.ttftMs +
        job.request.outputTokens * s.perOutputTokenMs +
        job.request.inputTokens * s.perInputTokenMs) *
      slow;
    this.#w.clock.schedule(ms, () => this.#finish(job));
  }

  #finish(job: Job) {
    this.#inService--;
    const usage = { inputTokens: job.request.inputTokens, outputTokens: job.request.outputTokens };
    this.#w.meter.served(job.arrivedAt, usage);
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
