import { AsyncLocalStorage } from "node:async_hooks";
import type { Clock } from "../core/clock.ts";
import { type Journal, JournalDivergenceError, type Lease } from "./journal.ts";
import type { RunLimits } from "./limits.ts";

/** What the journal keeps of one call: what it was (its kind and the request's digest)
 * and its answer, as the adapter that made it encodes it, in JSON text: a store that
 * reorders an object's keys (Postgres's jsonb) must not change what a replay reads, or the
 * next request would differ from the one the run made. */
export interface CallRecord {
  readonly kind: string;
  readonly digest: string;
  readonly answer: string;
}

/** A call's place in its run's journal: the answer recorded there, or a way to record one. */
export type CallSlot =
  | { readonly replayed: true; readonly answer: unknown }
  | { readonly replayed: false; record(answer: unknown): Promise<void> };

/** What a run hands its call log. */
export interface CallLogContext {
  readonly runId: string;
  readonly journal: Journal;
  readonly clock: Clock;
  readonly limits: RunLimits;
  readonly divergence: "cut" | "fail";
  /** Takes or renews the run's lease (throws when another worker holds the run). */
  hold(): Promise<Lease | undefined>;
  /** What a write refused by the journal (the run was taken over) throws. */
  lost(): Promise<Error>;
}

/** The run whose step is running: calls inside a step are the step's (it journals them). */
const steps = new AsyncLocalStorage<object>();
export const inStepOf = <T>(run: object, fn: () => T): T => steps.run(run, fn);

/** A call's place in the journal: a step named by its number, which no user step can take. */
const PLACE = /^#\d{6,}$/;
const placeOf = (n: number) => `#${String(n).padStart(6, "0")}`;

/**
 * The run's journaled calls (docs/architecture.md, rule 14): every model call and tool call
 * made with a run that has a journal takes the next place in the run, in the order the
 * calls start. A call whose place holds the same request (by digest) is answered from the
 * journal without a request; one that finishes records its answer there. A request other
 * than the one recorded (a run that went another way) cuts the journal at that place:
 * what the run recorded from there on is forgotten, and the run goes on live (or, with
 * `divergence: "fail"`, throws `JournalDivergenceError`).
 */
export class CallLog {
  readonly #c: CallLogContext;
  readonly #owner: object;
  #n = 0;
  /** Cut: nothing from here on is looked up. */
  #live = false;

  constructor(owner: object, c: CallLogContext) {
    this.#owner = owner;
    this.#c = c;
  }

  /** The next call's place. Undefined inside one of the run's steps (the step covers it). */
  async open(kind: string, digest: string): Promise<CallSlot | undefined> {
    if (steps.getStore() === this.#owner) return undefined;
    const n = ++this.#n; // taken before any wait: calls started together keep their order
    const c = this.#c;
    const lease = await c.hold();
    const step = placeOf(n);
    if (!this.#live) {
      const prior = await c.journal.get(c.runId, step);
      const rec = prior?.status === "ok" ? (prior.value as CallRecord | null) : undefined;
      if (rec?.digest === digest && typeof rec.answer === "string") {
        c.limits.count("callsReplayed");
        return { replayed: true, answer: JSON.parse(rec.answer) };
      }
      if (rec !== undefined) await this.#cut(n, kind, rec, lease);
    }
    return {
      replayed: false,
      record: async (answer) => {
        const value: CallRecord = { kind, digest, answer: JSON.stringify(answer) ?? "null" };
        const at = c.clock.now();
        const ok = await c.journal.put({ runId: c.runId, step, status: "ok", value, at }, lease);
        if (ok === false) throw await c.lost();
      },
    };
  }

  /** Forgets every call the journal holds from place `n` on; the run is live from there. */
  async #cut(n: number, kind: string, found: CallRecord | null, lease: Lease | undefined) {
    const c = this.#c;
    if (c.divergence === "fail" || c.journal.forget === undefined)
      throw new JournalDivergenceError(c.runId, n, kind, found?.kind);
    const later = (await c.journal.steps(c.runId))
      .map((s) => s.step)
      .filter((s) => PLACE.test(s) && Number(s.slice(1)) >= n);
    if ((await c.journal.forget(c.runId, later, lease)) === false) throw await c.lost();
    this.#live = true;
    c.limits.count("journalCuts");
  }
}
