import { ConfigError } from "../../index.ts";

/** Reads one field: returns its value, or throws a ConfigError naming it (`at`). */
export type Field<T> = (x: unknown, at: string, owner: string) => T;

const bad = (owner: string, at: string, x: unknown, allowed: string): never => {
  throw new ConfigError(owner, at, x, allowed);
};

export const int =
  (
    min: number,
    max = Number.MAX_SAFE_INTEGER,
    what = `an integer from ${min} to ${max}`,
  ): Field<number> =>
  (x, at, owner) => {
    if (typeof x !== "number" || !Number.isInteger(x) || x < min)
      bad(owner, at, x, `an integer >= ${min}`);
    return (x as number) <= max ? (x as number) : bad(owner, at, x, what);
  };

export const num =
  (min: number, max: number): Field<number> =>
  (x, at, owner) =>
    typeof x === "number" && Number.isFinite(x) && x >= min && x <= max
      ? x
      : bad(owner, at, x, `a number from ${min} to ${max}`);

export const text: Field<string> = (x, at, owner) =>
  typeof x === "string" && x !== "" ? x : bad(owner, at, x, "a non-empty string");

export const flag: Field<boolean> = (x, at, owner) =>
  typeof x === "boolean" ? x : bad(owner, at, x, "true or false");

export const oneOf =
  <T extends string>(values: readonly T[]): Field<T> =>
  (x, at, owner) =>
    values.includes(x as T)
      ? (x as T)
      : bad(owner, at, x, `one of ${values.map((v) => JSON.stringify(v)).join(", ")}`);

/** A pair [from, to] with from >= min and to >= from. */
export const pair =
  (min: number): Field<[number, number]> =>
  (x, at, owner) => {
    if (!Array.isArray(x) || x.length !== 2) bad(owner, at, x, "a pair [from, to]");
    const from = num(min, Number.MAX_VALUE)((x as unknown[])[0], `${at}[0]`, owner);
    return [from, num(from, Number.MAX_VALUE)((x as unknown[])[1], `${at}[1]`, owner)];
  };

/** A plain object whose keys are all in `fields`; each present key is read by its field. */
export function record<T>(fields: { [K in keyof T]-?: Field<T[K]> }): Field<T> {
  return (x, at, owner) => {
    if (x === null || typeof x !== "object" || Array.isArray(x))
      bad(owner, at || "options", x, "an object");
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(x as object)) {
      const field = Object.hasOwn(fields, key)
        ? (fields as Record<string, Field<unknown>>)[key]
        : undefined;
      const path = at ? `${at}.${key}` : key;
      if (field === undefined)
        bad(owner, path, value, `a known option (${Object.keys(fields).join(", ")})`);
      else if (value !== undefined) out[key] = field(value, path, owner);
    }
    return out as T;
  };
}

export const list =
  <T>(item: Field<T>): Field<T[]> =>
  (x, at, owner) =>
    Array.isArray(x)
      ? x.map((e, i) => item(e, `${at}[${i}]`, owner))
      : bad(owner, at, x, "an array");
