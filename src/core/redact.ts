/** Secrets never leave (DESIGN rule 10): API keys, bearer tokens and credentials in URLs
 * are masked in anything breakwater throws, logs or reports. */
const PATTERNS: [RegExp, string][] = [
  [/\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{8,}/g, "sk-[redacted]"],
  [/\bAIza[0-9A-Za-z_-]{20,}/g, "AIza[redacted]"],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, "$1 [redacted]"],
  [
    /\b((?:x-api-key|x-goog-api-key|api[-_]?key|authorization)["']?\s*[:=]\s*["']?)[^\s"',;&]+/gi,
    "$1[redacted]",
  ],
  [/([?&](?:key|api_key|apikey|token|access_token)=)[^&#\s]+/gi, "$1[redacted]"],
  [/(\/\/)[^/\s:@]+:[^/\s@]+@/g, "$1[redacted]@"],
];

export function redact(text: string): string {
  let out = text;
  for (const [re, to] of PATTERNS) out = out.replace(re, to);
  return out;
}
