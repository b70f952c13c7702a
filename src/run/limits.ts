import type { GiveUpReason } from "../core/errors.ts";
import type { Ledger } from "../core/ledger.ts";
import { addUsage, totalTokens, type Usage, ZERO_USAGE } from "../core/usage.ts";

/** What a run counts. */
export interface RunStats {
  calls: number;
  attempts: number;
  retries: number;
  /** The model calling a tool again after it was told not to (the fourth retry layer). */
  modelRecalls: number;
  toolFailures: number;
  /** Steps answered from the journal instead of run again. */
  stepsReplayed: number;
  /** Model and tool calls answered from the journal instead of sent again. */
  callsReplayed: number;
  /** Times a resumed run asked for something else than the journal held at that place
   * (a run that went another way): the journal was cut there, the run went on live. */
  journalCuts: number;
}

/** A run's caps, resolved. */
export interface RunCaps {
  readonly deadline: number;
  readonly maxAttempts: number;
  readonly maxTokens: number;
  readonly maxRetryShare: number;
  readonly maxToolFailures: number;
  readonly callShare: number;
}

/**
 * A run's accounting and the caps it enforces (docs/architecture.md, rules 1, 6 and 7): the
 * ledgers of its calls, its counters, and why it refuses another attempt or retry.
 */
export class RunLimits {
  readonly caps: RunCaps;
  readonly ledgers: Ledger[] = [];
  readonly stats: RunStats = {
    calls: 0,
    attempts: 0,
    retries: 0,
    modelRecalls: 0,
    toolFailures: 0,
    stepsReplayed: 0,
    callsReplayed: 0,
    journalCuts: 0,
  };

  /** The run that started this one: its caps hold here too, and it counts what this does. */
  readonly parent: RunLimits | undefined;
  /** Calls of the whole run tree answered so far (counted at its root). */
  #answered = 0;
  readonly #root: RunLimits;

  constructor(caps: RunCaps, parent?: RunLimits) {
    this.caps = caps;
    this.parent = parent;
    this.#root = parent === undefined ? this : parent.#root;
  }

  /** A call of this run answered: the turn has paid for something (rule 23). */
  answered(): void {
    this.#root.#answered++;
  }

  /** Whether the run tree this run belongs to has had a call answered: a turn already paid
   * for goes before one not begun wherever something must be rationed (rule 23). */
  get started(): boolean {
    return this.#root.#answered > 0;
  }

  addCall(ledger: Ledger): void {
    this.ledgers.push(ledger);
    this.stats.calls++;
    this.parent?.addCall(ledger);
  }

  addAttempt(isRetry: boolean): void {
    this.stats.attempts++;
    if (isRetry) this.stats.retries++;
    this.parent?.addAttempt(isRetry);
  }

  /** Counts a tool failure or a model re-call, here and up the run tree. */
  count(what: "toolFailures" | "modelRecalls" | "callsReplayed" | "journalCuts"): void {
    this.stats[what]++;
    this.parent?.count(what);
  }

  get usage(): Usage {
    return this.ledgers.reduce((u, l) => addUsage(u, l.usage), ZERO_USAGE);
  }

  get wasted(): Usage {
    return this.ledgers.reduce((u, l) => addUsage(u, l.wasted), ZERO_USAGE);
  }

  get billed(): Usage {
    return addUsage(this.usage, this.wasted);
  }

  /** The latest a call starting now may end: a safe share of what is left of the run. */
  callDeadline(now: number): number {
    const { deadline, callShare } = this.caps;
    const own =
      deadline === Number.POSITIVE_INFINITY
        ? deadline
        : now + callShare * Math.max(0, deadline - now);
    return this.parent === undefined ? own : Math.min(own, this.parent.callDeadline(now));
  }

  /** Why the run refuses another attempt now, if it does. */
  refuseAttempt(now: number): GiveUpReason | undefined {
    const c = this.caps;
    if (now >= c.deadline) return "run-deadline";
    if (this.stats.attempts >= c.maxAttempts) return "run-attempts";
    if (this.stats.toolFailures >= c.maxToolFailures) return "run-tool-failures";
    if (totalTokens(this.billed) >= c.maxTokens) return "run-tokens";
    return this.parent?.refuseAttempt(now);
  }

  /** Why the run refuses a retry now (beyond refusing any attempt), if it does. */
  refuseRetry(): GiveUpReason | undefined {
    const c = this.caps;
    if (c.maxRetryShare >= 1) return this.parent?.refuseRetry();
    const wasted = totalTokens(this.wasted);
    const base = c.maxTokens === Number.POSITIVE_INFINITY ? totalTokens(this.billed) : c.maxTokens;
    if (base > 0 && wasted / base > c.maxRetryShare) return "run-retry-share";
    return this.parent?.refuseRetry();
  }
}
