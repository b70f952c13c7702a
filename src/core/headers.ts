import { get, isA, isArray, keysOf } from "./safe.ts";

/** What a header bag looks like across fetch, SDK errors and plain objects. */
export type HeaderBag =
  | {
      /** The header's value (fetch's `Headers`). */
      get(name: string): string | null | undefined;
    }
  | ReadonlyMap<string, unknown>
  | Readonly<Record<string, unknown>>;

/** Reads one header, case-insensitively, from a Headers, a Map or a plain record. Never
 * throws: anything else (or anything that throws when read) has no headers. */
export function readHeader(headers: unknown, name: string): string | undefined {
  if (headers === null || typeof headers !== "object") return undefined;
  const lower = name.toLowerCase();
  try {
    if (isA(headers, Map)) {
      for (const [k, v] of headers) if (String(k).toLowerCase() === lower) return asString(v);
      return undefined;
    }
    const getter = get(headers, "get");
    if (typeof getter === "function") return asString(getter.call(headers, name));
  } catch {
    return undefined;
  }
  for (const key of keysOf(headers))
    if (key.toLowerCase() === lower) return asString(get(headers, key));
  return undefined;
}

function asString(v: unknown): string | undefined {
  if (v === null || v === undefined) return undefined;
  if (isArray(v)) return v.length > 0 ? asString(v[0]) : undefined;
  return typeof v === "string" || typeof v === "number" ? String(v) : undefined;
}
