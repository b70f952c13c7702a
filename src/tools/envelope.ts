import { BreakwaterError, failureOf, type GiveUpReason } from "../core/errors.ts";
import { type Failure, type FailureKind, failure, KINDS } from "../core/failure.ts";
import { redact } from "../core/redact.ts";
import { describeError, get, isA } from "../core/safe.ts";

/** What the model should do about a failed tool call. */
export type ToolAction = "retry_later" | "fix_arguments" | "check_state" | "do_not_retry";

/** What the model gets when a guarded tool gives up: an envelope, not a stack trace. */
export interface ToolErrorEnvelope {
  status: "error";
  error: { code: string; message: string; retryable: false; action: ToolAction };
}

/** Throw it from a tool for arguments the model can fix (or let a schema error through). */
export class ToolArgumentError extends Error {
  override name = "ToolArgumentError";
}

/** Thrown instead of returning the envelope, when the caller asks for errors. */
export class ToolError extends Error {
  override name = "ToolError";
  readonly envelope: ToolErrorEnvelope;
  constructor(envelope: ToolErrorEnvelope, cause?: unknown) {
    super(`${envelope.error.code}: ${envelope.error.message}`, { cause });
    this.envelope = envelope;
  }
}

const ARGUMENT_ERRORS = new Set([
  "ToolArgumentError",
  "ZodError",
  "TypeValidationError",
  "InvalidToolInputError",
  "InvalidToolArgumentsError",
]);

/** The one table of envelope codes: what the model is told for each kind of failure. */
const CODES: Readonly<Record<FailureKind, string>> = {
  rate_limited: "RATE_LIMITED",
  overloaded: "UNAVAILABLE",
  server_error: "UNAVAILABLE",
  timeout: "UNAVAILABLE",
  transport: "UNAVAILABLE",
  quota_exhausted: "QUOTA_EXHAUSTED",
  context_exceeded: "INVALID_ARGUMENT",
  invalid_request: "INVALID_ARGUMENT",
  auth: "PERMISSION_DENIED",
  not_found: "NOT_FOUND",
  content_filtered: "CONTENT_FILTERED",
  truncated: "OUTPUT_TRUNCATED",
  invalid_output: "INVALID_OUTPUT",
  cancelled: "CANCELLED",
  unknown: "INTERNAL",
};

/** Codes a tool may report as a value, read back as the kind they stand for (the first
 * kind with that code), plus gRPC's name for a rate limit. */
const KIND_OF_CODE: ReadonlyMap<string, FailureKind> = new Map([
  ...(Object.entries(CODES) as [FailureKind, string][])
    .reverse()
    .map(([kind, code]) => [code, kind] as const),
  ["RESOURCE_EXHAUSTED", "rate_limited"],
]);

/** A code a tool reports for an outage (UNAVAILABLE, RATE_LIMITED, RESOURCE_EXHAUSTED). */
export function isTransientCode(code: unknown): boolean {
  const kind = typeof code === "string" ? KIND_OF_CODE.get(code) : undefined;
  return kind !== undefined && KINDS[kind].retryable;
}

/** The failure a tool reported as a value and flagged transient: the kind its code stands
 * for, or an outage of the dependency when the code means nothing to us. */
export function transientFailure(code: string | undefined): Failure {
  const kind = code === undefined ? undefined : KIND_OF_CODE.get(code);
  return failure(kind !== undefined && KINDS[kind].retryable ? kind : "overloaded", {
    ...(code !== undefined && { code }),
  });
}

const MESSAGES: Record<ToolAction, string> = {
  retry_later:
    "The service is unavailable right now; nothing was done. Tell the user and try again later.",
  fix_arguments: "The arguments were rejected. Fix them and call the tool again.",
  check_state:
    "The outcome is unknown: the request may or may not have taken effect. Check the current state with a read tool before doing anything else; do not repeat this call.",
  do_not_retry: "This call cannot succeed as it is; do not retry it.",
};

export function envelope(code: string, action: ToolAction, detail?: string): ToolErrorEnvelope {
  const message = detail
    ? `${MESSAGES[action]} (${redact(detail).slice(0, 300)})`
    : MESSAGES[action];
  return { status: "error", error: { code, message, retryable: false, action } };
}

export function isArgumentError(error: unknown): boolean {
  for (
    let e = error, i = 0;
    e !== null && typeof e === "object" && i < 8;
    e = get(e, "cause"), i++
  ) {
    const name = get(e, "name");
    if (typeof name === "string" && ARGUMENT_ERRORS.has(name)) return true;
  }
  return false;
}

/** Reasons that mean "the dependency could not be reached in time; nothing to fix". */
const LATER: ReadonlySet<GiveUpReason> = new Set([
  "circuit-open",
  "budget",
  "retry-after-too-long",
]);

/** The envelope for a call the guard gave up on. */
export function envelopeFor(
  error: unknown,
  reason: GiveUpReason | undefined,
  outcomeUnknown: boolean,
): ToolErrorEnvelope {
  const detail = isA(error, Error) ? describeError(error, false) : undefined;
  if (outcomeUnknown) return envelope("OUTCOME_UNKNOWN", "check_state", detail);
  if (isArgumentError(error)) return envelope("INVALID_ARGUMENT", "fix_arguments", detail);
  const ours = isA(error, BreakwaterError);
  if (
    (reason !== undefined && LATER.has(reason)) ||
    (ours && (reason === "deadline" || reason === "attempt-timeout"))
  )
    return envelope("UNAVAILABLE", "retry_later", detail);
  const f = failureOf(error);
  const kind = f?.kind ?? "unknown";
  if (
    kind === "invalid_request" &&
    (f?.status === undefined || f.status === 400 || f.status === 422)
  )
    return envelope("INVALID_ARGUMENT", "fix_arguments", detail);
  return envelope(CODES[kind], KINDS[kind].retryable ? "retry_later" : "do_not_retry", detail);
}
