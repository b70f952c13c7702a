import type { Failure } from "./failure.ts";

/**
 * What sending a request again does (docs/architecture.md, rule 20): a `read` and an
 * `idempotent` write may be resent after any transient failure; an `unsafe` one changes
 * state on the server each time it arrives (a turn appended to a stored conversation, a
 * batch job, a payment), so it is resent only after a failure that proves it never arrived.
 */
export type Effect = "read" | "idempotent" | "unsafe";

export const EFFECTS: readonly Effect[] = ["read", "idempotent", "unsafe"];

/** The request never reached the server: refused, not resolved, or the connection never
 * came up (no byte of the request was written). */
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

/** Answers that turn a request away before it is processed: rate limited, unavailable,
 * overloaded. A 500, 502 or 504 does not: the server (or the one behind a gateway) may
 * have done the work before it failed. */
const TURNED_AWAY = new Set([429, 503, 529]);

/** A failure that proves the request did nothing: safe to send again even when unsafe.
 * A timeout, a reset or a cut answer proves nothing: the outcome is unknown. */
export function provesNothingRan(f: Failure): boolean {
  if (f.status !== undefined) return TURNED_AWAY.has(f.status);
  return f.code !== undefined && NEVER_SENT.has(f.code);
}
