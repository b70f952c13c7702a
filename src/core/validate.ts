/** Thrown for a bad option: names the option, the value and what is allowed. */
export class ConfigError extends TypeError {
  override name = "BreakwaterConfigError";
  readonly option: string;
  readonly value: unknown;

  constructor(owner: string, option: string, value: unknown, allowed: string) {
    super(`${owner}: option "${option}" must be ${allowed}; got ${show(value)}`);
    this.option = option;
    this.value = value;
  }
}

export function show(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "function") return "a function";
  if (typeof v === "bigint") return `${v}n`;
  if (v !== null && typeof v === "object") {
    try {
      return JSON.stringify(v);
    } catch {
      return Object.prototype.toString.call(v);
    }
  }
  return String(v);
}

/** A validator for one owner ("policy", "RetryBudget", ...). Each check returns the value. */
export function validator(owner: string) {
  const fail = (option: string, value: unknown, allowed: string): never => {
    throw new ConfigError(owner, option, value, allowed);
  };
  const number = (
    option: string,
    v: unknown,
    min: number,
    max: number,
    int: boolean,
    minLabel = `>= ${min}`,
  ) => {
    if (
      typeof v !== "number" ||
      Number.isNaN(v) ||
      v < min ||
      v > max ||
      (int && !Number.isInteger(v))
    ) {
      const what = int ? "an integer" : "a number";
      fail(
        option,
        v,
        max === Number.POSITIVE_INFINITY ? `${what} ${minLabel}` : `${what} from ${min} to ${max}`,
      );
    }
    return v as number;
  };
  return {
    fail,
    /** An integer >= min (Infinity allowed only where `infinite`). */
    int(option: string, v: unknown, min: number, infinite = false): number {
      if (infinite && v === Number.POSITIVE_INFINITY) return v;
      return number(option, v, min, Number.POSITIVE_INFINITY, true);
    },
    /** A finite number in [min, max]. */
    num(option: string, v: unknown, min: number, max = Number.POSITIVE_INFINITY): number {
      if (v === Number.POSITIVE_INFINITY && max === Number.POSITIVE_INFINITY)
        fail(option, v, `a finite number >= ${min}`);
      return number(option, v, min, max, false);
    },
    /** Milliseconds: a finite number > 0. */
    ms(option: string, v: unknown): number {
      if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
        fail(option, v, "a finite number of milliseconds > 0");
      return v as number;
    },
    oneOf<T extends string>(option: string, v: unknown, allowed: readonly T[]): T {
      if (!allowed.includes(v as T))
        fail(option, v, `one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}`);
      return v as T;
    },
    fn<T>(option: string, v: unknown): T {
      if (typeof v !== "function") fail(option, v, "a function");
      return v as T;
    },
    object(option: string, v: unknown): Record<string, unknown> {
      if (v === null || typeof v !== "object" || Array.isArray(v)) fail(option, v, "an object");
      return v as Record<string, unknown>;
    },
    /** Rejects keys the owner does not know: a typo must not silently mean "default". */
    known(option: string, v: Record<string, unknown>, keys: readonly string[]): void {
      for (const k of Object.keys(v)) {
        if (!keys.includes(k) && v[k] !== undefined) {
          fail(option ? `${option}.${k}` : k, v[k], `a known option (${keys.join(", ")})`);
        }
      }
    },
  };
}
