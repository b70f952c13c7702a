import type { GiveUpReason } from "../core/errors.ts";
import type { Failure } from "../core/failure.ts";
import type { AttemptRecord, Ledger } from "../core/ledger.ts";

/** Why a call waits before an attempt: the server's Retry-After, the backoff, the rate
 * limiter (its queue for room, a concurrency slot, or a 429's hold on every call), or a
 * pool's wait for a deployment's cooldown to end. */
export type WaitCause = "retry-after" | "backoff" | "rate-limit" | "cooldown";

/** What an observer is told when a call starts. */
export interface CallInfo {
  /** A stream (`policy.stream`) or one answer (`policy.execute`). */
  readonly stream: boolean;
  /** The policy's model, when it names one. */
  readonly model: string | undefined;
  /** The upstream this call goes to (a fallback chain names it). */
  readonly upstream: string | undefined;
  /** Who serves it (`CallOptions.provider`), when the caller says. */
  readonly provider?: string | undefined;
  /** What it asks for (`CallOptions.operation`), when the caller says. */
  readonly operation?: string | undefined;
}

/** How a call ended. */
export type CallEnd =
  | { readonly ok: true; readonly ledger: Ledger }
  | {
      readonly ok: false;
      readonly reason: GiveUpReason;
      readonly failure: Failure | undefined;
      readonly error: unknown;
      readonly ledger: Ledger;
      /** The error the caller will be handed instead of `error`, when an adapter hands the
       * answer to an SDK that raises its own (`CallOptions.seenAs`). */
      readonly seenAs?: PromiseLike<unknown> | undefined;
    };

/** One attempt, watched. */
export interface AttemptWatch {
  /** Runs the attempt's operation (an observer runs it inside its own context, so the
   * SDK's HTTP spans nest under the attempt). */
  run<T>(fn: () => T): T;
  /** A stream's first content chunk came. */
  firstContent?(): void;
  /** The attempt ended, as the ledger records it. */
  end(record: AttemptRecord): void;
}

/** One call, watched. Every method is called at most as the call goes; none may throw
 * (what throws is reported as a hook error and ignored). */
export interface CallWatch {
  /** Attempt `n` starts; `hedge`: while an earlier one is still in flight (rule 21). */
  attempt(n: number, hedge?: boolean): AttemptWatch;
  /** The call waits `ms` before the next attempt: the server's hint, or the backoff. */
  wait(ms: number, why: "retry-after" | "backoff", failure: Failure): void;
  /** The call waited `ms` before an attempt, told once it ended: at the rate limiter (its
   * queue, a 429's hold), or for a pool's deployment to recover (with the failure that
   * left the last one). Optional: an observer without it is not told. */
  held?(ms: number, why: "rate-limit" | "cooldown", failure: Failure | undefined): void;
  /** The call ended. */
  end(outcome: CallEnd): void;
}

/**
 * Watches every call of a policy (telemetry: `breakwater/otel`). Asked once per call; a
 * call it returns nothing for is not watched, and costs nothing more.
 */
export interface Observer {
  /** A call starts: how to watch it, or undefined to leave it unwatched. */
  call(info: CallInfo): CallWatch | undefined;
}

export const isObserver = (x: unknown): x is Observer =>
  x !== null && typeof x === "object" && typeof (x as Observer).call === "function";
