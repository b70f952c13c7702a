/** Reading what callers hand us, whatever it is: a throwing getter, a Proxy (revoked or
 * not), a cycle, a bigint or a Symbol reads as "nothing there", never as an exception. */

export type Obj = object;

export const isObj = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** `o[key]`, or undefined when `o` is not an object or reading it throws. */
export function get(o: unknown, key: string): unknown {
  if (!isObj(o)) return undefined;
  try {
    return (o as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/** A non-empty string, or undefined. */
export const str = (x: unknown): string | undefined =>
  typeof x === "string" && x !== "" ? x : undefined;

/** `o[key]` when it is a non-empty string. */
export const getStr = (o: unknown, key: string): string | undefined => str(get(o, key));

/** Own enumerable keys; none when listing them throws. */
export function keysOf(o: unknown): string[] {
  if (!isObj(o)) return [];
  try {
    return Object.keys(o);
  } catch {
    return [];
  }
}

/** Array.isArray, which throws on a revoked Proxy. */
export function isArray(x: unknown): x is unknown[] {
  try {
    return Array.isArray(x);
  } catch {
    return false;
  }
}

/** `x instanceof C`, which throws on a revoked Proxy. */
export function isA<T>(x: unknown, C: abstract new (...args: never[]) => T): x is T {
  try {
    return x instanceof C;
  } catch {
    return false;
  }
}

/** "Name: message" of an error, or the value as text; never throws. */
export function describeError(error: unknown, withName = true): string {
  try {
    if (isA(error, Error)) {
      const message = getStr(error, "message") ?? "";
      return withName ? `${getStr(error, "name") ?? "Error"}: ${message}` : message;
    }
    return String(error);
  } catch {
    return "a value that cannot be shown";
  }
}
