import { Run } from "../index.ts";

/** The headers that put a request in an agent's run, and set the run's limits when it
 * begins (a later request's limits are those the run began with). */
export const RUN_HEADER = "x-breakwater-run";
const LIMITS = {
  "x-breakwater-run-deadline-ms": "deadlineMs",
  "x-breakwater-run-max-attempts": "maxAttempts",
  "x-breakwater-run-max-tokens": "maxTokens",
} as const;

const ID = /^[\w.:-]{1,128}$/;

/**
 * An agent's calls across requests, by the run id its requests carry: one `Run` each, so
 * one deadline, one attempt cap and one token budget cover them all (the library's rules
 * for a run). Kept while used: a run idle for `idleMs` starts over, and past `max` runs the
 * least recently used is let go.
 */
export class Runs {
  readonly #runs = new Map<string, { run: Run; seen: number }>();
  readonly #idleMs: number;
  readonly #max: number;

  constructor(idleMs = 600_000, max = 10_000) {
    this.#idleMs = idleMs;
    this.#max = max;
  }

  /** The request's run: its header's (made with its limits the first time), or a run of its
   * own; an error's words when a header is not valid. */
  of(headers: Record<string, string | string[] | undefined>): { run: Run } | { error: string } {
    const id = headers[RUN_HEADER];
    if (id === undefined) return { run: new Run() };
    if (typeof id !== "string" || !ID.test(id))
      return { error: `${RUN_HEADER} must be 1 to 128 letters, digits, _ . : or -` };
    const now = Date.now();
    const kept = this.#runs.get(id);
    this.#runs.delete(id); // re-inserted below: the map's order is the order of use
    if (kept !== undefined && now - kept.seen < this.#idleMs) {
      this.#runs.set(id, { run: kept.run, seen: now });
      return { run: kept.run };
    }
    const limits: Record<string, number> = {};
    for (const [header, option] of Object.entries(LIMITS)) {
      const v = headers[header];
      if (v === undefined) continue;
      const n = typeof v === "string" && /^\d{1,15}$/.test(v) ? Number(v) : Number.NaN;
      if (!(n > 0)) return { error: `${header} must be a whole number > 0` };
      limits[option] = n;
    }
    const run = new Run({ id, ...limits });
    this.#runs.set(id, { run, seen: now });
    if (this.#runs.size > this.#max) this.#runs.delete(this.#runs.keys().next().value!);
    return { run };
  }
}

/** What one request cost within its run (the run may have had other requests before): its
 * attempts, and the tokens of the calls it added to the run, read from those calls' ledgers
 * alone (not the whole run's totals, which a long run would add up again each request). */
export class Tally {
  readonly run: Run;
  readonly #attempts: number;
  readonly #calls: number;

  constructor(run: Run) {
    this.run = run;
    this.#attempts = run.stats.attempts;
    this.#calls = run.ledgers.length;
  }

  get attempts(): number {
    return this.run.stats.attempts - this.#attempts;
  }

  /** The tokens this request's calls billed, and of them those wasted on failed attempts. */
  cost(): { billed: number; wasted: number } {
    let billed = 0;
    let wasted = 0;
    const ledgers = this.run.ledgers;
    for (let i = this.#calls; i < ledgers.length; i++) {
      const l = ledgers[i]!;
      const w = total(l.wasted);
      billed += total(l.usage) + w;
      wasted += w;
    }
    return { billed, wasted };
  }
}

const total = (u: { inputTokens: number; outputTokens: number }) => u.inputTokens + u.outputTokens;
