import { createHash } from "node:crypto";

/** JSON with sorted keys, so equal arguments hash alike whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    if (typeof (value as { toJSON?: unknown }).toJSON === "function")
      return canonicalJson((value as { toJSON(): unknown }).toJSON());
    const keys = Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

/** A short, stable digest of a tool's arguments. */
export const argsDigest = (args: unknown): string => sha256(canonicalJson(args)).slice(0, 32);
