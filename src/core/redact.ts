/** Secrets never leave (docs/architecture.md, rule 10): API keys, bearer tokens and credentials in URLs
 * are masked in anything breakwater throws, logs or reports. */
const PATTERNS: [RegExp, string][] = [
  // A header or parameter first, with its auth scheme, so "Authorization: Bearer x" is masked whole.
  [
    /\b((?:x-api-key|x-goog-api-key|api[-_]?key|authorization)["']?\s*[:=]\s*["']?)(?:(?:Bearer|Basic)\s+)?[^\s"',;&]+/gi,
    "$1[redacted]",
  ],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, "$1 [redacted]"],
  [/\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{8,}/g, "sk-[redacted]"],
  [/\bAIza[0-9A-Za-z_-]{20,}/g, "AIza[redacted]"],
  [/([?&](?:key|api_key|apikey|token|access_token)=)[^&#\s]+/gi, "$1[redacted]"],
  [/(\/\/)[^/\s:@]+:[^/\s@]+@/g, "$1[redacted]@"],
];

export function redact(text: string): string {
  let out = text;
  for (const [re, to] of PATTERNS) out = out.replace(re, to);
  return out;
}

/** Masks secrets in an error's message and in its causes' messages, in place (the error
 * stays the same instance, so `instanceof` still works). */
export function scrubError<E>(error: E): E {
  const seen = new Set<unknown>();
  for (
    let e: unknown = error;
    e !== null && typeof e === "object" && !seen.has(e) && seen.size < 8;
    e = (e as { cause?: unknown }).cause
  ) {
    seen.add(e);
    const m = (e as { message?: unknown }).message;
    if (typeof m !== "string") continue;
    const clean = redact(m);
    if (clean === m) continue;
    try {
      (e as { message: string }).message = clean;
    } catch {
      // a read-only message (DOMException): nothing of ours to mask there
    }
  }
  return error;
}
