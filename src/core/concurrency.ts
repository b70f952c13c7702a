import type { Failure } from "./failure.ts";

/** How an attempt that held a slot ended, as the concurrency limit reads it. */
export interface SlotEnd {
  /** When the attempt was sent, on the limiter's clock. */
  readonly startedAt: number;
  /** The failure, when it failed; absent for an answer. */
  readonly failure?: Failure | undefined;
}

/** What the limiter saw as an attempt was sent. */
export interface AtSend {
  /** Attempts in flight, itself included. */
  readonly inFlightAtSend: number;
  /** The limit it was sent against. */
  readonly limitAtSend: number;
  /** Whether calls were waiting for room. */
  readonly heldAtSend: boolean;
}

/** A cut multiplies the limit by this (TCP CUBIC's and AWS adaptive mode's beta). */
const BETA = 0.7;
/** Answers per measurement of the pace. */
const SAMPLE = 20;
/** An attempt sent with this share of the limit in flight was sent against it. */
const BINDING = 0.9;
/** With no overload for this long, the limit lifts (no cap while nothing is wrong). */
const QUIET_MS = 30_000;

/**
 * The signals of an upstream's overload (docs/architecture.md, rule 19): an overloaded
 * answer (503, 529, `overloaded_error`), or an attempt our own timer cut before it was
 * answered (the request waited in the upstream's queue). A 429 is the rate limiter's to
 * hold; a spent quota, a bad request or a cancellation says nothing of load.
 */
export function isOverload(f: Failure | undefined): boolean {
  if (f === undefined) return false;
  if (f.kind === "overloaded") return true;
  return f.kind === "timeout" && (f.code === "attempt_timeout" || f.code === "first-token_timeout");
}

/**
 * An adaptive concurrency limit for one upstream: how many attempts may be in flight at
 * once, learned from what the upstream answers, like TCP's congestion window.
 *
 * - Unarmed, nothing caps the load but pace: the attempts in flight may not pass twice
 *   what was in flight when the last answers came (held demand released at once, after
 *   a rate limit lifts, goes out over a few round trips, not in one burst).
 * - An overload cuts it (the first arms it) to BETA of what was in flight when the failed
 *   attempt was sent, but only if that attempt was sent pushing at the limit (with at
 *   least BINDING of it in flight; unarmed, while held demand was being released, or when
 *   most recent attempts were cut by our timer unanswered: they queued at the upstream for
 *   their whole window): the only overload this limit can be blamed for is one met while
 *   pushing at it. Failures met well below it (a share of requests failing whatever is
 *   sent, a smaller upstream) are the admission's to handle, and never drive it down; so,
 *   once it is armed, are overload answers no more than twice as frequent at the limit as
 *   below it (demand that keeps the limit full would otherwise meet them there round trip
 *   after round trip). At most one cut per round trip: only an attempt sent after the last
 *   cut, once one sent after it was answered, cuts again.
 * - Answers grow it while it binds: by about its square root per round trip once it is at
 *   its slow-start threshold, and by one per answer (doubling per round trip) below it.
 *   A cut puts the threshold at the new limit, except after an episode that began with
 *   timeouts: then at what was in flight as answers came before it (the queue drained, that
 *   level is safe), until the upstream, answering again, is overloaded again. With no
 *   overload for QUIET_MS it lifts if the load is well below it, and grows by doubling
 *   again if not.
 *
 * Every number is a ratio or a count of outcomes but the quiet period.
 */
export class AdaptiveConcurrency {
  #limit = Number.POSITIVE_INFINITY;
  /** Slow start below it, growth by its square root above. */
  #ssthresh = Number.POSITIVE_INFINITY;
  #troubleAt = Number.NEGATIVE_INFINITY;
  #cutAt = Number.NEGATIVE_INFINITY;
  #answeredSinceCut = true;
  /** The most in flight when answers came: in the last SAMPLE answers and the ones before. */
  #pace = 0;
  #paceBefore = 0;
  #paceN = 0;
  /** What was in flight as answers came before a queueing episode (0: none). */
  #wmax = 0;
  /** The share of recent attempts (answers and timeouts) our timer cut, a moving average
   * over about SAMPLE of them. */
  #timedOut = 0;

  /** Unarmed, and never troubled: an answer only moves the pace (it needs no time). */
  get calm(): boolean {
    return this.#limit === Number.POSITIVE_INFINITY && this.#troubleAt === Number.NEGATIVE_INFINITY;
  }

  /** A cut is in force: the upstream showed overload and the limit has not lifted since. */
  get armed(): boolean {
    return this.#limit !== Number.POSITIVE_INFINITY;
  }

  /** The attempts that may be in flight now (Infinity: no cap). */
  get limit(): number {
    if (this.#limit !== Number.POSITIVE_INFINITY) return this.#limit;
    const seen = Math.max(this.#pace, this.#paceBefore);
    return seen === 0 ? Number.POSITIVE_INFINITY : 2 * seen;
  }

  ended(end: SlotEnd, sent: AtSend, inFlight: number, now: number): boolean {
    const f = end.failure;
    if (end.startedAt >= this.#cutAt && f === undefined) this.#answeredSinceCut = true;
    const cutByUs = f?.kind === "timeout" && isOverload(f);
    if (f === undefined || cutByUs) this.#timedOut += ((cutByUs ? 1 : 0) - this.#timedOut) / SAMPLE;
    // How often the upstream answers with an overload, at the limit and below it (our
    // timer's cuts are load whatever the share: they are not counted here).
    if (f === undefined || (isOverload(f) && !cutByUs)) this.#share(sent, f !== undefined);
    if (isOverload(f)) {
      this.#troubleAt = now;
      this.#overloaded(end, sent, now);
      return false;
    }
    if (f !== undefined) return false;
    this.#paced(inFlight);
    if (this.#limit === Number.POSITIVE_INFINITY) return true;
    if (now - this.#troubleAt > QUIET_MS) return this.#quiet(inFlight, now);
    if (2 * inFlight < this.#limit) return false;
    const l = this.#limit;
    this.#limit = l < this.#ssthresh ? l + 1 : l + 1 / Math.sqrt(l);
    return true;
  }

  /** How often answers were overloads, for attempts sent at the limit and below it (moving
   * averages over about SAMPLE of each). */
  #atLimit = 0;
  #below = 0;
  #share(sent: AtSend, overload: boolean): void {
    const x = overload ? 1 : 0;
    if (sent.inFlightAtSend >= BINDING * sent.limitAtSend)
      this.#atLimit += (x - this.#atLimit) / SAMPLE;
    else this.#below += (x - this.#below) / SAMPLE;
  }

  /** An overload met pushing at the limit cuts it, once per round trip. */
  #overloaded(end: SlotEnd, sent: AtSend, now: number): void {
    const level = sent.inFlightAtSend;
    const against = sent.limitAtSend;
    // Armed, overload answers no more frequent at the limit than they were below it are the
    // upstream's whatever is sent (a share of requests failing): cutting more would not
    // lower them, and would take the limit down round trip after round trip. An attempt our
    // timer cut waited its whole window in the upstream's queue: that is always load.
    // Unarmed, the limit is only pace: releasing held demand pushes at it too.
    const unarmed = this.#limit === Number.POSITIVE_INFINITY;
    const cut = end.failure?.kind === "timeout";
    if (!unarmed && !cut && this.#atLimit <= 2 * this.#below) return;
    // Most recent attempts waited their whole window in the upstream's queue until our timer
    // cut them: unlike fast 503s, that is our load showing, even unarmed.
    const queued = cut && this.#timedOut > 0.5;
    const pushing = level >= BINDING * against || (unarmed && (sent.heldAtSend || queued));
    if (!pushing) return;
    if (end.startedAt < this.#cutAt || !this.#answeredSinceCut) return;
    // A queue that filled (timeouts) drains, and the level it answered at before is safe
    // again: regrowth doubles back to it. Released held demand is no such level (#wmax 0).
    if (unarmed) this.#wmax = queued ? Math.max(this.#pace, this.#paceBefore) : 0;
    // Overloaded again once it answers again: it takes less than that level now.
    else if (this.#timedOut <= 0.5) this.#wmax = 0;
    // Of the limit in force (unarmed: the pace) or what was in flight, whichever is less.
    this.#limit = Math.max(1, Math.floor(BETA * Math.min(this.limit, level)));
    this.#ssthresh = Math.max(this.#limit, this.#wmax);
    this.#cutAt = now;
    this.#answeredSinceCut = false;
  }

  /** No overload for QUIET_MS: lift when the load is well below the limit; else grow by
   * doubling again. */
  #quiet(inFlight: number, now: number): boolean {
    this.#troubleAt = now;
    if (2 * inFlight < this.#limit) this.#limit = Number.POSITIVE_INFINITY;
    this.#ssthresh = Number.POSITIVE_INFINITY;
    this.#wmax = 0;
    return true;
  }

  #paced(inFlight: number): void {
    this.#pace = Math.max(this.#pace, inFlight);
    if (++this.#paceN < SAMPLE) return;
    this.#paceBefore = this.#pace;
    this.#pace = 0;
    this.#paceN = 0;
  }
}
