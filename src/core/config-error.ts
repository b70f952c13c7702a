/** The one error for bad options, apart from the rule tables (validate.ts), so code that
 * must import little (a Temporal workflow bundle) can throw it. */

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

/** A value as an error message shows it; never throws, whatever it is handed. */
export function show(v: unknown): string {
  try {
    if (typeof v === "string") return JSON.stringify(v);
    if (typeof v === "function") return "a function";
    if (typeof v === "bigint") return `${v}n`;
    if (typeof v === "symbol") return v.toString();
    if (v !== null && typeof v === "object") return JSON.stringify(v) ?? "an object";
    return String(v);
  } catch {
    return "an object that cannot be shown";
  }
}
