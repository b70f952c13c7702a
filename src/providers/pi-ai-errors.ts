/**
 * pi-ai keeps only an error's message (`errorMessage`): the SDK's error, its status, body
 * and headers are gone by the time its `error` event is read. What the message still says,
 * read back into the shape the one classifier reads (rule 3): the Stainless SDKs' `"<status>
 * <body or message>"`, their connection and timeout errors by their exact words, undici's
 * `terminated` for a body cut mid-stream. A Retry-After is not in the message: a 429 backs
 * off by the policy's own schedule.
 */

/** An SDK error as pi-ai reported it: its status and body when the message had them. */
export class PiAiError extends Error {
  override name = "PiAiError";
  readonly status: number | undefined;
  /** The answer's JSON body (Anthropic's `{ type, error }`), or `{ message }`. */
  readonly error: unknown;

  constructor(message: string, status: number | undefined, body: unknown) {
    super(message);
    this.status = status;
    this.error = body;
  }
}

/** The SDK class each of pi-ai's exact words comes from (the classifier reads the name). */
const WORDS: Readonly<Record<string, string>> = {
  "Connection error.": "APIConnectionError",
  "Request timed out.": "APIConnectionTimeoutError",
  terminated: "APIConnectionError", // undici: the socket closed mid-body
};

/** pi-ai's `errorMessage` as an error the classifier reads. */
export function piFailure(message: string): Error {
  const named = WORDS[message.trim()];
  if (named !== undefined)
    return Object.assign(new PiAiError(message, undefined, undefined), { name: named });
  const m = /^(\d{3}) ([\s\S]*)$/.exec(message);
  if (m === null) return new PiAiError(message, undefined, undefined);
  return new PiAiError(message, Number(m[1]), bodyOf(m[2]!));
}

function bodyOf(rest: string): unknown {
  try {
    const parsed: unknown = JSON.parse(rest);
    if (parsed !== null && typeof parsed === "object") return parsed;
  } catch {} // plain words: the SDK's message
  return { message: rest };
}
