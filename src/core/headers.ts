/** What a header bag looks like across fetch, SDK errors and plain objects. */
export type HeaderBag =
  | { get(name: string): string | null | undefined }
  | ReadonlyMap<string, unknown>
  | Readonly<Record<string, unknown>>;

/** Reads one header, case-insensitively, from a Headers, a Map or a plain record. */
export function readHeader(headers: unknown, name: string): string | undefined {
  if (headers === null || typeof headers !== "object") return undefined;
  const lower = name.toLowerCase();
  if (headers instanceof Map) {
    for (const [k, v] of headers) if (String(k).toLowerCase() === lower) return asString(v);
    return undefined;
  }
  const get = (headers as { get?: unknown }).get;
  if (typeof get === "function") {
    try {
      return asString(get.call(headers, name));
    } catch {
      return undefined;
    }
  }
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === lower) return asString((headers as Record<string, unknown>)[key]);
  }
  return undefined;
}

function asString(v: unknown): string | undefined {
  if (v === null || v === undefined) return undefined;
  if (Array.isArray(v)) return v.length > 0 ? asString(v[0]) : undefined;
  return typeof v === "string" || typeof v === "number" ? String(v) : undefined;
}
