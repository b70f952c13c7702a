import { type Clock, isClock } from "./clock.ts";
import { ConfigError, show } from "./config-error.ts";

export { ConfigError, show };

const range = (min: number, max: number, what: string) =>
  max === Number.POSITIVE_INFINITY ? `${what} >= ${min}` : `${what} from ${min} to ${max}`;

/** Checks for one owner ("policy", "RetryBudget", ...). Each returns the value it checked. */
export class Validator {
  readonly owner: string;

  constructor(owner: string) {
    this.owner = owner;
  }

  fail(option: string, value: unknown, allowed: string): never {
    throw new ConfigError(this.owner, option, value, allowed);
  }

  /** An integer >= min (Infinity allowed only where `infinite`). */
  int(option: string, v: unknown, min: number, infinite = false): number {
    if (infinite && v === Number.POSITIVE_INFINITY) return v;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min)
      this.fail(option, v, `an integer >= ${min}`);
    return v;
  }

  /** A finite number in [min, max]. */
  num(option: string, v: unknown, min: number, max = Number.POSITIVE_INFINITY): number {
    if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max)
      this.fail(
        option,
        v,
        Number.isFinite(max) ? range(min, max, "a number") : `a finite number >= ${min}`,
      );
    return v;
  }

  /** Milliseconds: a finite number > 0. */
  ms(option: string, v: unknown): number {
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
      this.fail(option, v, "a finite number of milliseconds > 0");
    return v;
  }

  oneOf<T extends string>(option: string, v: unknown, allowed: readonly T[]): T {
    if (!allowed.includes(v as T))
      this.fail(option, v, `one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}`);
    return v as T;
  }

  fn<T>(option: string, v: unknown): T {
    if (typeof v !== "function") this.fail(option, v, "a function");
    return v as T;
  }

  str(option: string, v: unknown): string {
    if (typeof v !== "string" || v === "") this.fail(option, v, "a non-empty string");
    return v;
  }

  object(option: string, v: unknown): Record<string, unknown> {
    if (v === null || typeof v !== "object" || Array.isArray(v)) this.fail(option, v, "an object");
    return v as Record<string, unknown>;
  }

  /** Rejects keys the owner does not know: a typo must not silently mean "default". */
  known(option: string, v: Record<string, unknown>, keys: readonly string[]): void {
    for (const k of Object.keys(v)) {
      if (keys.includes(k) || v[k] === undefined) continue;
      const meant = MEANT[k];
      const hint = meant !== undefined && keys.includes(meant.key) ? `; ${meant.why}` : "";
      this.fail(option ? `${option}.${k}` : k, v[k], `a known option (${keys.join(", ")})${hint}`);
    }
  }
}

export const validator = (owner: string): Validator => new Validator(owner);

/** Names other libraries use, and what they are here (they count differently). */
const MEANT: Readonly<Record<string, { key: string; why: string }>> = {
  retries: {
    key: "maxAttempts",
    why: "breakwater counts attempts, the first included: p-retry's retries: 2 is maxAttempts: 3",
  },
  maxRetries: {
    key: "maxAttempts",
    why: "breakwater counts attempts, the first included: an SDK's maxRetries: 2 is maxAttempts: 3",
  },
  maxRetryAfter: {
    key: "retryAfter",
    why: 'use retryAfter: { maxMs, beyondMax } ("give-up" by default; "wait-max" waits the cap like ky)',
  },
};

/** One option's rule: reads the given value (undefined when absent) and returns the
 * resolved one, or fails naming the option. */
export type Rule<T> = (v: Validator, name: string, value: unknown) => T;

/** The table of an owner's options: the key list and every check derive from it. */
export type Spec = Readonly<Record<string, Rule<unknown>>>;

export type Parsed<S extends Spec> = { readonly [K in keyof S]: ReturnType<S[K]> };

/**
 * Validates `input` against `spec`: unknown keys are rejected, each rule resolves its key
 * (`undefined` means the default; `null` is a bad value like any other).
 */
export function parseOptions<S extends Spec>(
  owner: string | Validator,
  spec: S,
  input: unknown,
  at = "",
): Parsed<S> {
  const v = typeof owner === "string" ? new Validator(owner) : owner;
  const o = input === undefined ? {} : v.object(at || "options", input);
  const keys = keysOf(spec);
  // Options made per call pass here: the common case (every key known) costs one lookup a key.
  for (const k in o) if (!Object.hasOwn(spec, k) && Object.hasOwn(o, k)) v.known(at, o, keys);
  const out: Record<string, unknown> = {};
  for (const key of keys) out[key] = spec[key]!(v, at ? `${at}.${key}` : key, o[key]);
  return out as Parsed<S>;
}

const specKeys = new WeakMap<Spec, readonly string[]>();
/** A spec's keys, listed once. */
function keysOf(spec: Spec): readonly string[] {
  let keys = specKeys.get(spec);
  if (keys === undefined) specKeys.set(spec, (keys = Object.keys(spec)));
  return keys;
}

/** A spec prepared for `checkOptions`: its rules by key, looked up without a prototype. */
export type Checker = ReadonlyMap<string, Rule<unknown>>;
export const checker = (spec: Spec): Checker => new Map(Object.entries(spec));

/**
 * Checks `input` against a prepared spec without building a resolved copy: for options
 * handed to every call, where the common case must cost little. Same errors as
 * `parseOptions`.
 */
export function checkOptions(v: Validator, rules: Checker, input: unknown): void {
  if (input === null || typeof input !== "object" || Array.isArray(input))
    v.object("options", input);
  const o = input as Record<string, unknown>;
  for (const key in o) {
    const rule = rules.get(key);
    if (rule !== undefined) rule(v, key, o[key]);
    else if (Object.hasOwn(o, key) && o[key] !== undefined) v.known("", o, [...rules.keys()]);
  }
}

const absent = (x: unknown): x is undefined => x === undefined;

/** A number option's bounds and default, by name. */
export interface NumberRule {
  /** @default 0 */
  readonly min?: number;
  /** @default Infinity (no upper bound) */
  readonly max?: number;
  /** What an allowed value is, in words, when the bounds alone do not say it well. */
  readonly allowed?: string;
}

/** With a `default` (NaN: a marker the owner fills in), an absent option reads as it;
 * without one, as undefined. */
type Defaulted<R, T> = R extends { readonly default: T } ? T : T | undefined;

const int = <R extends NumberRule & { readonly default?: number; readonly infinite?: boolean }>(
  r: R,
): Rule<Defaulted<R, number>> =>
  ((v, name, x) => {
    if (absent(x)) return r.default;
    const n = v.int(name, x, r.min ?? 0, r.infinite === true);
    if (n <= (r.max ?? Number.POSITIVE_INFINITY)) return n;
    return r.allowed === undefined ? v.num(name, n, r.min ?? 0, r.max) : v.fail(name, n, r.allowed);
  }) as Rule<Defaulted<R, number>>;

const num = <R extends NumberRule & { readonly default?: number }>(
  r: R,
): Rule<Defaulted<R, number>> =>
  ((v, name, x) => {
    if (absent(x)) return r.default;
    if (r.allowed === undefined) return v.num(name, x, r.min ?? 0, r.max);
    const ok =
      typeof x === "number" && x >= (r.min ?? 0) && x <= (r.max ?? Number.POSITIVE_INFINITY);
    return ok ? x : v.fail(name, x, r.allowed);
  }) as Rule<Defaulted<R, number>>;

/** Rule builders for option tables: `opt.int({ min: 1, default: 3, infinite: true })`. */
export const opt = {
  /** An integer in [min, max]; `infinite`: Infinity is allowed too ("no limit"). */
  int,
  /** A finite number in [min, max]. */
  num,
  /** Milliseconds > 0; absent means `default` (Infinity: no limit). */
  ms:
    (r: { readonly default?: number } = {}): Rule<number> =>
    (v, name, x) =>
      absent(x) ? (r.default ?? Number.POSITIVE_INFINITY) : v.ms(name, x),
  /** A pair [from, to] of numbers, min <= from <= to. */
  pair:
    (r: { readonly min: number }): Rule<[number, number] | undefined> =>
    (v, name, x) => {
      if (absent(x)) return undefined;
      if (!Array.isArray(x) || x.length !== 2) v.fail(name, x, "a pair [from, to]");
      const [a, b] = x as unknown[];
      const from = v.num(`${name}[0]`, a, r.min);
      return [from, v.num(`${name}[1]`, b, from)];
    },
  /** An array, each item read by `item`. */
  list:
    <T>(item: Rule<T>): Rule<Exclude<T, undefined>[] | undefined> =>
    (v, name, x) => {
      if (absent(x)) return undefined;
      if (!Array.isArray(x)) v.fail(name, x, "an array");
      return (x as unknown[]).map((e, i) => {
        const at = `${name}[${i}]`;
        const got = item(v, at, e);
        return got === undefined
          ? v.fail(at, e, "a value, not undefined")
          : (got as Exclude<T, undefined>);
      });
    },
  oneOf: (<T extends string>(values: readonly T[], fallback?: T) =>
    (v: Validator, name: string, x: unknown) =>
      absent(x) ? fallback : v.oneOf(name, x, values)) as {
    <T extends string>(values: readonly T[], fallback: T): Rule<T>;
    <T extends string>(values: readonly T[]): Rule<T | undefined>;
  },
  bool: ((fallback?: boolean) => (v: Validator, name: string, x: unknown) => {
    if (absent(x)) return fallback;
    if (typeof x !== "boolean") v.fail(name, x, "true or false");
    return x as boolean;
  }) as { (fallback: boolean): Rule<boolean>; (): Rule<boolean | undefined> },
  fn:
    <F>(): Rule<F | undefined> =>
    (v, name, x) =>
      absent(x) ? undefined : v.fn<F>(name, x),
  /** A non-empty string; `pattern` with the words for what it allows. */
  str:
    (r: { readonly pattern?: RegExp; readonly allowed?: string } = {}): Rule<string | undefined> =>
    (v, name, x) => {
      if (absent(x)) return undefined;
      const s = v.str(name, x);
      if (r.pattern !== undefined && !r.pattern.test(s))
        v.fail(name, x, r.allowed ?? `a string matching ${r.pattern}`);
      return s;
    },
  /** A Clock (now, sleep, schedule): the one test of one (`isClock`). */
  clock: (): Rule<Clock | undefined> => (v, name, x) => {
    if (absent(x)) return undefined;
    if (!isClock(x))
      v.fail(name, x, "a Clock (now, sleep, schedule), e.g. systemClock or new VirtualClock()");
    return x as Clock;
  },
  /** Anything (checked where it is used, e.g. an AbortSignal by duck type). */
  any:
    <T>(check?: (x: unknown) => boolean, allowed = ""): Rule<T | undefined> =>
    (v, name, x) => {
      if (absent(x)) return undefined;
      if (check && !check(x)) v.fail(name, x, allowed);
      return x as T;
    },
  /** A nested table of options, read as a whole (absent: every option's default). */
  object:
    <S extends Spec>(spec: S): Rule<Parsed<S>> =>
    (v, name, x) =>
      parseOptions(v, spec, x, name),
  /** A nested table that may be absent (undefined) as a whole. */
  record:
    <S extends Spec>(spec: S): Rule<Parsed<S> | undefined> =>
    (v, name, x) =>
      absent(x) ? undefined : parseOptions(v, spec, x, name),
};
