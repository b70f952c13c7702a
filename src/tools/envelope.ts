import { BreakwaterError, failureOf, type GiveUpReason } from "../core/errors.ts";
import type { Failure, FailureKind } from "../core/failure.ts";
import { redact } from "../core/redact.ts";

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

const CODES: Record<FailureKind, string> = {
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
  cancelled: "CANCELLED",
  unknown: "INTERNAL",
};

const TRANSIENT: ReadonlySet<FailureKind> = new Set([
  "rate_limited",
  "overloaded",
  "server_error",
  "timeout",
  "transport",
]);

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
    e = (e as { cause?: unknown }).cause, i++
  ) {
    if (ARGUMENT_ERRORS.has(String((e as { name?: unknown }).name))) return true;
  }
  return false;
}

/** The envelope for a call the guard gave up on. */
export function envelopeFor(
  error: unknown,
  reason: GiveUpReason | undefined,
  outcomeUnknown: boolean,
): ToolErrorEnvelope {
  const detail = error instanceof Error ? error.message : undefined;
  if (outcomeUnknown) return envelope("OUTCOME_UNKNOWN", "check_state", detail);
  if (isArgumentError(error)) return envelope("INVALID_ARGUMENT", "fix_arguments", detail);
  if (reason === "circuit-open" || reason === "budget" || reason === "retry-after-too-long") {
    return envelope(reason === "budget" ? "UNAVAILABLE" : "UNAVAILABLE", "retry_later", detail);
  }
  if (error instanceof BreakwaterError && (reason === "deadline" || reason === "attempt-timeout")) {
    return envelope("UNAVAILABLE", "retry_later", detail);
  }
  const f: Failure | undefined = failureOf(error);
  const kind = f?.kind ?? "unknown";
  if (
    kind === "invalid_request" &&
    (f?.status === 400 || f?.status === 422 || f?.status === undefined)
  ) {
    return envelope("INVALID_ARGUMENT", "fix_arguments", detail);
  }
  return envelope(CODES[kind], TRANSIENT.has(kind) ? "retry_later" : "do_not_retry", detail);
}
