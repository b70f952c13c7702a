import { get, isA, isArray, isObj, keysOf } from "./safe.ts";

/** Secrets never leave (docs/architecture.md, rule 10): API keys, bearer tokens and
 * credentials in URLs are masked in anything breakwater throws, logs or reports. */
const SCHEME = "(?:(?:Bearer|Basic|Token|Bot|ApiKey|Key)\\s+)?";
const PATTERNS: [RegExp, string][] = [
  // A header or parameter first, with its auth scheme, so "Authorization: Bearer x" is
  // masked whole; "name: value", "name=value", "'name' => 'value'", JSON "name":"value".
  [
    new RegExp(
      `\\b((?:x-api-key|x-goog-api-key|api[-_]?key|authorization|proxy-authorization)["']?\\s*(?:=>|[:=])\\s*["']?)${SCHEME}[^\\s"',;&]+`,
      "gi",
    ),
    "$1[redacted]",
  ],
  [/\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}/g, "$1 [redacted]"],
  // Keys after a word boundary or an URL-encoded "=" (key%3Dsk-...).
  [/(?:\b|(?<=%3[Dd]))sk-(?:ant-|proj-)?[A-Za-z0-9_-]{8,}/g, "sk-[redacted]"],
  [/(?:\b|(?<=%3[Dd]))AIza[0-9A-Za-z_-]{20,}/g, "AIza[redacted]"],
  [/([?&](?:key|api_key|apikey|token|access_token)=)[^&#\s]+/gi, "$1[redacted]"],
  [/((?:key|api_key|apikey|token|access_token)%3[Dd])[^&#\s%]+/gi, "$1[redacted]"],
  [/(\/\/)[^/\s:@]+:[^/\s@]+@/g, "$1[redacted]@"],
];

/** Field names whose value is a secret whatever it looks like. */
const SECRET_FIELD =
  /^(?:authorization|proxy-authorization|x-api-key|x-goog-api-key|api[-_]?key|apikey|cookie|set-cookie|x-auth-token|access[-_]?token|password|secret)$/i;
const MASK = "[redacted]";

/** What every secret pattern needs somewhere in the text: most text has none of it. */
const MAYBE = /sk-|AIza|bearer|basic|token|key|auth|%3d|@/i;

/** Masks API keys, bearer tokens, credentials in URLs and the like in `text`. */
export function redact(text: string): string {
  if (!MAYBE.test(text)) return text;
  let out = text;
  for (const [re, to] of PATTERNS) out = out.replace(re, to);
  return out;
}

/** Error fields that are not enumerable but carry text: what a report shows. The stack is
 * read only when the message held a secret: V8 formats it lazily from the current message,
 * and formatting it for every error would cost more than everything else here. */
const ERROR_FIELDS = ["message", "cause", "errors"];
const MAX_NODES = 5_000;
const MAX_DEPTH = 40;

/** Sets a field in place, also when it is read-only but configurable (keeps its class). */
function setField(o: object, key: string, value: unknown): void {
  try {
    (o as Record<string, unknown>)[key] = value;
    if (get(o, key) === value) return;
  } catch {
    // read-only: try defining it
  }
  try {
    const enumerable = Object.prototype.propertyIsEnumerable.call(o, key);
    Object.defineProperty(o, key, { value, writable: true, configurable: true, enumerable });
  } catch {
    // frozen: nothing of ours can mask it
  }
}

/** Header bags with entries (fetch Headers and look-alikes). */
const isHeaders = (o: object): o is Headers => typeof Headers !== "undefined" && isA(o, Headers);

/**
 * Walks an error graph once, bounded (nodes and depth) and cycle-safe. Errors (and the
 * thrown value itself) are masked where they stand, so the provider's own error keeps its
 * class; anything else that holds a secret (a headers object, a request config) is
 * replaced on its owner by a masked copy, so objects shared with a client are never
 * changed under it.
 */
class Scrubber {
  readonly #seen = new Set<object>();

  #enter(o: object, depth: number): boolean {
    if (depth > MAX_DEPTH || this.#seen.size >= MAX_NODES || this.#seen.has(o)) return false;
    this.#seen.add(o);
    return true;
  }

  inPlace(o: object, depth: number): void {
    if (!this.#enter(o, depth)) return;
    const error = isA(o, Error);
    const fields = error ? [...new Set([...ERROR_FIELDS, ...keysOf(o)])] : keysOf(o);
    for (const key of fields) {
      if (key === "stack") continue;
      const changed = this.#field(o, key, depth);
      if (changed && key === "message" && error) this.#field(o, "stack", depth);
    }
  }

  /** Masks one field where it stands; true when it had to. */
  #field(o: object, key: string, depth: number): boolean {
    const v = get(o, key);
    const clean = this.#value(v, key, depth + 1);
    if (clean === v) return false;
    setField(o, key, clean);
    return true;
  }

  #value(v: unknown, key: string, depth: number): unknown {
    if (typeof v === "string") return SECRET_FIELD.test(key) ? MASK : redact(v);
    if (!isObj(v)) return v;
    if (isA(v, Error)) {
      this.inPlace(v, depth);
      return v;
    }
    return this.#copy(v, depth);
  }

  /** `o` itself when nothing in it is secret, else a masked copy. */
  #copy(o: object, depth: number): object {
    if (!this.#enter(o, depth)) return o;
    if (isHeaders(o) || isA(o, Map)) return this.#copyEntries(o, depth);
    let out: Record<string, unknown> | unknown[] | undefined;
    for (const key of keysOf(o)) {
      const v = get(o, key);
      const clean = this.#value(v, key, depth + 1);
      if (clean === v) continue;
      out ??= isArray(o) ? [...o] : { ...(o as Record<string, unknown>) };
      (out as Record<string, unknown>)[key] = clean;
    }
    return out ?? o;
  }

  #copyEntries(o: Headers | Map<unknown, unknown>, depth: number): object {
    let entries: [unknown, unknown][];
    try {
      entries = [...o.entries()];
    } catch {
      return o;
    }
    let changed = false;
    const clean = entries.map(([k, v]): [unknown, unknown] => {
      const c = this.#value(v, String(k), depth + 1);
      if (c !== v) changed = true;
      return [k, c];
    });
    if (!changed) return o;
    return isA(o, Map) ? new Map(clean) : new Headers(clean as [string, string][]);
  }
}

/** Masks secrets in every string the error graph carries (messages, stacks, causes,
 * bodies, headers, nested errors), in place: the error stays the same instance, so
 * `instanceof` still works. Never throws. */
export function scrubError<E>(error: E): E {
  if (isObj(error)) new Scrubber().inPlace(error, 0);
  return error;
}
