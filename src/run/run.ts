import { type Clock, systemClock } from "../core/clock.ts";
import type { GiveUpReason } from "../core/errors.ts";
import type { Ledger } from "../core/ledger.ts";
import { redact } from "../core/redact.ts";
import { addUsage, totalTokens, type Usage, ZERO_USAGE } from "../core/usage.ts";
import { validator } from "../core/validate.ts";
import type { Journal } from "./journal.ts";

export interface RunOptions {
  /** Identifies the run in idempotency keys and journals. Default: a random UUID. */
  id?: string;
  /** The whole run's deadline, set once at construction. Default: none. */
  deadlineMs?: number;
  /** Provider attempts across every call of the run (not per call). Default: unlimited. */
  maxAttempts?: number;
  /** Tokens (input + output, billed) the run may spend. Default: unlimited. */
  maxTokens?: number;
  /** Stop once wasted (retry) tokens exceed this share of `maxTokens` (or of billed
   * tokens when there is no allowance), e.g. 0.5. Default: no cap. */
  maxRetryShare?: number;
  /** Tool failures the run tolerates before it ends with `run-tool-failures`. */
  maxToolFailures?: number;
  /** The share of the run's remaining time one call may take, leaving room for the run
   * to finish cleanly. Default 0.8. */
  callShare?: number;
  clock?: Clock;
  /** Records finished steps (see `step`), so a run started again with the same `id`
   * resumes at the step that failed. */
  journal?: Journal;
}

export interface RunStats {
  calls: number;
  attempts: number;
  retries: number;
  /** The model calling a tool again after it was told not to (the fourth retry layer). */
  modelRecalls: number;
  toolFailures: number;
  /** Steps answered from the journal instead of run again. */
  stepsReplayed: number;
}

/**
 * One agent run: a deadline set once at the start, a cap on attempts across all its calls,
 * and a token allowance. Every policy call made with `{ run }` draws on it (DESIGN rule 6).
 */
export class Run {
  readonly id: string;
  readonly clock: Clock;
  readonly startedAt: number;
  /** Absolute time on `clock`; Infinity when the run has no deadline. */
  readonly deadline: number;
  readonly maxAttempts: number;
  readonly maxTokens: number;
  readonly maxRetryShare: number;
  readonly maxToolFailures: number;
  readonly callShare: number;
  readonly ledgers: Ledger[] = [];
  readonly stats: RunStats = {
    calls: 0,
    attempts: 0,
    retries: 0,
    modelRecalls: 0,
    toolFailures: 0,
    stepsReplayed: 0,
  };
  readonly journal: Journal | undefined;
  /** Tool failures the model was told about, by tool and arguments (the re-call guard). */
  readonly #toolFailures = new Map<string, { answer: unknown; until: number }>();

  constructor(options: RunOptions = {}) {
    const v = validator("Run");
    v.known("", options as Record<string, unknown>, [
      "id",
      "deadlineMs",
      "maxAttempts",
      "maxTokens",
      "maxRetryShare",
      "maxToolFailures",
      "callShare",
      "clock",
      "journal",
    ]);
    if (options.id !== undefined && (typeof options.id !== "string" || options.id === "")) {
      v.fail("id", options.id, "a non-empty string");
    }
    this.id = options.id ?? globalThis.crypto.randomUUID();
    this.clock = options.clock ?? systemClock;
    this.startedAt = this.clock.now();
    this.deadline =
      options.deadlineMs === undefined
        ? Number.POSITIVE_INFINITY
        : this.startedAt + v.ms("deadlineMs", options.deadlineMs);
    this.maxAttempts = v.int(
      "maxAttempts",
      options.maxAttempts ?? Number.POSITIVE_INFINITY,
      1,
      true,
    );
    this.maxTokens = v.int("maxTokens", options.maxTokens ?? Number.POSITIVE_INFINITY, 1, true);
    this.maxRetryShare =
      options.maxRetryShare === undefined ? 1 : v.num("maxRetryShare", options.maxRetryShare, 0, 1);
    this.maxToolFailures = v.int(
      "maxToolFailures",
      options.maxToolFailures ?? Number.POSITIVE_INFINITY,
      1,
      true,
    );
    this.callShare = v.num("callShare", options.callShare ?? 0.8, 0.01, 1);
    const j = options.journal;
    if (j !== undefined && (typeof j?.get !== "function" || typeof j?.put !== "function")) {
      v.fail(
        "journal",
        j,
        "a Journal (get, put, steps), e.g. new MemoryJournal() or new SqliteJournal(file)",
      );
    }
    this.journal = j;
  }

  remainingMs(now = this.clock.now()): number {
    return Math.max(0, this.deadline - now);
  }

  /** The latest a call starting now may end: a safe share of what is left of the run. */
  callDeadline(now = this.clock.now()): number {
    return this.deadline === Number.POSITIVE_INFINITY
      ? this.deadline
      : now + this.callShare * this.remainingMs(now);
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

  /** Why the run refuses another attempt now, if it does. */
  refuseAttempt(now = this.clock.now()): GiveUpReason | undefined {
    if (now >= this.deadline) return "run-deadline";
    if (this.stats.attempts >= this.maxAttempts) return "run-attempts";
    if (this.stats.toolFailures >= this.maxToolFailures) return "run-tool-failures";
    if (totalTokens(this.billed) >= this.maxTokens) return "run-tokens";
    return undefined;
  }

  /** Why the run refuses a retry now (beyond refusing any attempt), if it does. */
  refuseRetry(): GiveUpReason | undefined {
    if (this.maxRetryShare >= 1) return undefined;
    const wasted = totalTokens(this.wasted);
    const base =
      this.maxTokens === Number.POSITIVE_INFINITY ? totalTokens(this.billed) : this.maxTokens;
    return base > 0 && wasted / base > this.maxRetryShare ? "run-retry-share" : undefined;
  }

  /**
   * Runs one step of the run once: with a journal, a step that already succeeded under
   * this run id returns its recorded result without running again, so a run restarted
   * after a failure resumes at the failed step. The result must be JSON.
   */
  async step<T>(name: string, fn: () => T | PromiseLike<T>): Promise<T> {
    if (typeof name !== "string" || name === "")
      throw new TypeError(`Run.step: "name" must be a non-empty string; got ${String(name)}`);
    const journal = this.journal;
    if (journal === undefined) return fn();
    const prior = await journal.get(this.id, name);
    if (prior?.status === "ok") {
      this.stats.stepsReplayed++;
      return prior.value as T;
    }
    let value: T;
    try {
      value = await fn();
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      await journal.put({
        runId: this.id,
        step: name,
        status: "failed",
        error: redact(message).slice(0, 2000),
        at: this.clock.now(),
      });
      throw error;
    }
    let json: string | undefined;
    try {
      json = JSON.stringify(value);
    } catch (error) {
      throw new TypeError(
        `Run.step "${name}": its result must be JSON to be journaled (${(error as Error).message})`,
      );
    }
    await journal.put({
      runId: this.id,
      step: name,
      status: "ok",
      value: json === undefined ? null : JSON.parse(json),
      at: this.clock.now(),
    });
    return value;
  }

  /** @internal the guard records what a tool call that failed told the model. */
  rememberToolFailure(key: string, answer: unknown, forMs: number): void {
    this.stats.toolFailures++;
    this.#toolFailures.set(key, { answer, until: this.clock.now() + forMs });
  }

  /** @internal what the model was told last time it made this exact tool call, if that
   * answer still stands. */
  recallToolFailure(key: string): unknown {
    const hit = this.#toolFailures.get(key);
    if (hit === undefined) return undefined;
    if (this.clock.now() >= hit.until) {
      this.#toolFailures.delete(key);
      return undefined;
    }
    return hit.answer;
  }

  /** @internal called by the policy. */
  addCall(ledger: Ledger): void {
    this.ledgers.push(ledger);
    this.stats.calls++;
  }

  /** @internal called by the policy when an attempt starts. */
  addAttempt(isRetry: boolean): void {
    this.stats.attempts++;
    if (isRetry) this.stats.retries++;
  }

  toJSON() {
    return {
      id: this.id,
      startedAt: this.startedAt,
      stats: this.stats,
      usage: this.usage,
      wasted: this.wasted,
      billed: this.billed,
    };
  }
}
