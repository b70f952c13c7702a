import { failureOf, type Ledger, type Policy, partialOf, reasonOf } from "../index.ts";
import {
  type Call,
  type Dialect,
  type Events,
  type Outgoing,
  openEvents,
  type Send,
} from "./fetch.ts";
import { SseEvent } from "./sse.ts";

/**
 * When a stream that broke after content may go on (opt-in), and from what: the text the
 * consumer already has, across breaks. Each break may continue again while the call's
 * deadline, attempts and admission allow; never after a tool call (one may be half-sent),
 * never on a failure that would not have been retried.
 */
export class Continuer {
  readonly #p: Policy;
  readonly #ledger: Ledger;
  readonly #deadlineAt: number;
  #prefix = "";
  #lead: Lead = { strip: 0, taken: 0 };

  /** `ledger`, `deadlineAt`: the first call's, which a continuation's attempts are booked on
   * and bound by. */
  constructor(p: Policy, ledger: Ledger, deadlineAt: number) {
    this.#p = p;
    this.#ledger = ledger;
    this.#deadlineAt = deadlineAt;
  }

  /** After `error`: what `build` makes of the prefill to go on from (trimmed: providers
   * refuse one that ends in whitespace), with the lead to take off the continuation's first
   * text and the call options it runs with; or undefined when it may not continue. */
  next<T>(error: unknown, build: (prefill: string) => T | undefined) {
    const f = failureOf(error);
    const answer = partialOf(error)?.answer;
    if (reasonOf(error) !== "stream-interrupted" || !f?.retryable || answer === undefined)
      return undefined;
    if (answer.toolCalls.length > 0) return undefined;
    this.#prefix += answer.text.slice(this.#lead.taken); // as the consumer read it
    const prefill = this.#prefix.trimEnd();
    const o = this.#p.options;
    const used = this.#ledger.attempts.length;
    if (prefill === "" || used >= o.maxAttempts || o.clock.now() >= this.#deadlineAt)
      return undefined;
    const built = build(prefill);
    if (built === undefined) return undefined;
    if (o.budget !== undefined && !o.budget.tryAcquire(f)) return undefined; // a continuation is a retry
    this.#lead = { strip: this.#prefix.length - prefill.length, taken: 0 };
    const call = {
      ledger: this.#ledger,
      deadlineAt: this.#deadlineAt,
      maxAttempts: o.maxAttempts - used,
    };
    return { built, lead: this.#lead, call };
  }
}

interface Context {
  p: Policy;
  req: Outgoing;
  call: Call;
  send: Send;
  dialect: Dialect;
  ledger: Ledger;
  deadlineAt: number;
}

/** The fetch layer's continuation: the request asks the model to go on from the prefill,
 * and its events are shaped to go on with the first answer. */
export function continuation(ctx: Context): (error: unknown) => Promise<Events | undefined> {
  const continuer = new Continuer(ctx.p, ctx.ledger, ctx.deadlineAt);
  return async (error) => {
    const raw = ctx.req.init.body;
    if (typeof raw !== "string") return undefined;
    const go = continuer.next(error, (prefill) =>
      ctx.dialect.continueWith!(ctx.req.url, JSON.parse(raw) as Record<string, unknown>, prefill),
    );
    if (go === undefined) return undefined;
    const req = { ...ctx.req, init: { ...ctx.req.init, body: JSON.stringify(go.built) } };
    const events = openEvents(
      ctx.p,
      req,
      { ...ctx.call, ...go.call },
      ctx.send,
      ctx.dialect,
      () => {},
    );
    return shaped(events, ctx.dialect, go.lead);
  };
}

/** The continuation's events, each as the dialect says the SDK should read it. */
function shaped(events: Events, dialect: Dialect, lead: Lead): Events {
  return {
    async next() {
      for (;;) {
        const r = await events.next();
        if (r.done) return r;
        const e = dialect.resume ? dialect.resume(r.value.json, r.value, lead) : r.value;
        if (e !== undefined) return { done: false, value: e };
      }
    },
    return: () => events.return(),
  };
}

/** An event rewritten with new data (its name kept). */
export function rewrite(event: SseEvent, data: unknown): SseEvent {
  const name = event.event === undefined ? "" : `event: ${event.event}\n`;
  return new SseEvent(`${name}data: ${JSON.stringify(data)}\n\n`);
}

/** Whitespace the prefix was trimmed of (`strip`), and how much of it the continuation's
 * first text gave back and was taken off (`taken`). */
export interface Lead {
  strip: number;
  taken: number;
}

/** Takes up to `lead.strip` whitespace characters off the start of the first text. */
export function stripLead(text: string, lead: Lead): string {
  let i = 0;
  while (i < lead.strip && i < text.length && /\s/.test(text[i]!)) i++;
  lead.strip = 0;
  lead.taken = i;
  return text.slice(i);
}
