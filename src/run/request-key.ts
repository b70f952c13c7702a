import { createHash } from "node:crypto";

/**
 * How a journal names a model call's request (docs/architecture.md, rule 14): the same
 * request at the same place of a resumed run is answered from the journal, so what names
 * it must be what the app asked for, not what a framework stamped on it this run.
 */

/** A user's reading of a model call's request before the journal names it: return what
 * names it (drop what your stack stamps per run). Handed a copy: at the fetch layer
 * `{ method, path, body }` (the body parsed when it is JSON), in the AI SDK middleware
 * `{ how, provider, model, params }` (per-run stamps already dropped). */
export type RequestKey = (request: Record<string, unknown>) => unknown;

/** The keys frameworks stamp per run on the AI SDK's provider options and metadata
 * (Mastra's `providerOptions.mastra.createdAt` on each prompt part, message ids, times):
 * dropped wherever they sit inside a `providerOptions` or `providerMetadata` object. */
export const RUN_STAMPS: ReadonlySet<string> = new Set([
  "createdAt",
  "updatedAt",
  "timestamp",
  "messageId",
  "requestId",
  "traceId",
  "spanId",
]);
const STAMPED = new Set(["providerOptions", "providerMetadata"]);

/** `value` as JSON text, without the per-run stamps of `RUN_STAMPS`. */
export function unstampedJson(value: unknown): string {
  const inside = new WeakSet<object>(); // the stamped containers and what they hold
  return (
    JSON.stringify(value, function (this: unknown, key, v) {
      if (this !== null && typeof this === "object" && inside.has(this)) {
        if (RUN_STAMPS.has(key)) return undefined;
        if (v !== null && typeof v === "object") inside.add(v);
      } else if (STAMPED.has(key) && v !== null && typeof v === "object") inside.add(v);
      return v;
    }) ?? ""
  );
}

/** The digest of a request's name. */
export const digestOf = (...parts: readonly string[]): string => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("base64url");
};
