import { reasonOf } from "../index.ts";
import { sayOnce } from "./scope.ts";

/**
 * A give-up is final for the call it ended (rule 15). A layer above an adapter that retries
 * any error (Mastra's agent loop, langchain's `modelRetryMiddleware`, a user's loop) would
 * run the policy's attempts again; it asks again for the very call: the same turns (the
 * frameworks build a call's turns once and copy the list on a retry, so its last turn is
 * the same object) of the same model, within seconds. That ask gets the same give-up at
 * once, nothing sent. A new call builds new turns; a caller who asks again with the same
 * turns later than `RETRY_WINDOW_MS` after the last ask (a person pressing "retry") is
 * sent: the window covers the frameworks' default backoffs (1 s, 2 s, 4 s), not a person.
 */

/** How long after a give-up (or the last ask refused) an ask is a layer's retry. */
export const RETRY_WINDOW_MS = 10_000;

interface GaveUp {
  readonly error: unknown;
  at: number;
}

/** The give-ups by a call's last turn, per model: a turn that is gone takes its entry. */
const givenUp = new WeakMap<object, Map<unknown, GaveUp>>();

/** What a retry of the same call shares: the last turn of its list (or the value). */
function anchor(turns: unknown): object | undefined {
  const last: unknown = Array.isArray(turns) ? turns[turns.length - 1] : undefined;
  if (typeof last === "object" && last !== null) return last;
  return typeof turns === "object" && turns !== null ? turns : undefined;
}

/** The call's ask, as the adapter saw it: its turns, its model, who would ask again. */
export interface Ask {
  readonly turns: unknown;
  readonly model: unknown;
  /** The adapter, for the warning. */
  readonly owner: string;
  /** Who asks again, as far as the adapter can tell ("Mastra's Agent maxRetries"). */
  readonly layer: () => string;
  /** The policy's clock. */
  readonly now: () => number;
}

/** The give-up this call already had, when a layer above asks for it again. */
export function askedAgain(a: Ask): { error: unknown } | undefined {
  const at = anchor(a.turns);
  const byModel = at && givenUp.get(at);
  const entry = byModel?.get(a.model);
  if (byModel === undefined || entry === undefined) return undefined;
  const now = a.now();
  if (now - entry.at > RETRY_WINDOW_MS) {
    byModel.delete(a.model);
    return undefined;
  }
  entry.at = now;
  sayOnce(
    a.owner,
    `a layer above (${a.layer()}) asked again for a call breakwater gave up on: it gets the same error, nothing is sent; set that layer's retries to 0`,
  );
  return { error: entry.error };
}

/** Records a give-up as final for its call; returns the error. */
export function gaveUpOn(a: Ask, error: unknown): unknown {
  const at = anchor(a.turns);
  // A deferred call is not final: the durable engine that ran it asks again after the wait
  // (rule 22), and that ask is the call going on, not a layer's retry.
  if (at === undefined || reasonOf(error) === "deferred") return error;
  const byModel = givenUp.get(at) ?? new Map<unknown, GaveUp>();
  givenUp.set(at, byModel.set(a.model, { error, at: a.now() }));
  return error;
}
