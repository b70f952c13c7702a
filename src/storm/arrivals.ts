import { readFileSync } from "node:fs";
import { opt, parseOptions } from "../internal.ts";

/** A request log that cannot be read as arrivals: names the file, the line and what is
 * wrong with it. */
export class ArrivalsError extends Error {
  override name = "BreakwaterArrivalsError";
}

/** One request of a replayed log: when it arrived (ms after the log's first) and its tokens. */
export interface Arrival {
  readonly atMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** A log's requests per second, over its span (at least a second). */
export const meanRate = (log: readonly Arrival[]): number =>
  log.length / Math.max(1, (log.at(-1)?.atMs ?? 0) / 1000);

/** Which columns of the CSV hold each field (the header's names). The defaults are the
 * Azure LLM inference traces' (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`). */
export interface ArrivalColumns {
  /** A date-time (`2023-11-16 18:17:03.98`, ISO 8601, a zone or UTC) or seconds. */
  time?: string;
  /** The request's input (prompt) tokens. */
  input?: string;
  /** Its output (generated) tokens. */
  output?: string;
}

const COLUMNS = { time: opt.str(), input: opt.str(), output: opt.str() };

const DEFAULTS: Required<ArrivalColumns> = {
  time: "TIMESTAMP",
  input: "ContextTokens",
  output: "GeneratedTokens",
};

/** `2023-11-16 18:17:03.9799600`, with `T`, a fraction of any length, `Z` or an offset. */
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$/;
/** Seconds, or a count of tokens: digits, a fraction allowed. */
const NUMBER = /^\d+(?:\.\d+)?$/;

/** A time field in ms: a date-time (UTC unless it names a zone) or a number of seconds;
 * NaN when it is neither. */
export function timeMs(field: string): number {
  if (NUMBER.test(field)) return Number(field) * 1000;
  const m = DATE_TIME.exec(field);
  if (m === null) return Number.NaN;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const whole = Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, +s!);
  // Date.UTC rolls an impossible date over (Feb 30 is Mar 2): refuse it instead.
  const back = new Date(whole);
  if (back.getUTCDate() !== +d! || back.getUTCMonth() !== +mo! - 1 || +h! > 23 || +mi! > 59)
    return Number.NaN;
  const fraction = frac === undefined ? 0 : Number(`0.${frac}`) * 1000;
  let offset = 0;
  if (zone !== undefined && zone !== "Z") {
    const sign = zone[0] === "-" ? -1 : 1;
    const digits = zone.slice(1).replace(":", "");
    offset = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
  }
  return whole + fraction - offset;
}

/** The fields of one CSV line: commas, double-quoted fields with "" for a quote. */
function fields(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    let value = "";
    if (line[i] === '"') {
      for (i++; i < line.length; i++) {
        if (line[i] !== '"') value += line[i];
        else if (line[i + 1] === '"') value += line[i++];
        else break;
      }
      i++; // the closing quote
    } else {
      const end = line.indexOf(",", i);
      value = line.slice(i, end === -1 ? line.length : end);
      i = end === -1 ? line.length : end;
    }
    out.push(value.trim());
    if (line[i] !== ",") return out;
    i++;
  }
}

type Fail = (where: string, what: string) => never;
const FLAGS = { time: "--time-column", input: "--input-column", output: "--output-column" };

/** Where each named column is in the header; fails naming the missing one and its flag. */
function columnIndexes(header: string[], names: Required<ArrivalColumns>, fail: Fail) {
  const at = (role: keyof ArrivalColumns) => {
    const i = header.indexOf(names[role]);
    if (i === -1)
      fail(
        "the header",
        `no column ${JSON.stringify(names[role])} for the ${role === "time" ? "arrival time" : `${role} tokens`} (it has ${header.map((h) => JSON.stringify(h)).join(", ")}); name it with ${FLAGS[role]}`,
      );
    return i;
  };
  return { time: at("time"), input: at("input"), output: at("output") };
}

/**
 * Reads a request log as arrivals: a CSV with a header naming its columns, one request a
 * line: when it arrived and its input and output tokens. Sorted by time, times from the
 * first arrival. Throws naming the source, the line and what is wrong (a missing column, a
 * time or a token count that is not one, no request at all).
 */
export function parseArrivals(
  text: string,
  columns: ArrivalColumns = {},
  source = "arrivals",
): Arrival[] {
  const given = parseOptions("arrivals", COLUMNS, columns);
  const names = {
    time: given.time ?? DEFAULTS.time,
    input: given.input ?? DEFAULTS.input,
    output: given.output ?? DEFAULTS.output,
  };
  const fail: Fail = (where, what) => {
    throw new ArrivalsError(`${source}: ${where}: ${what}`);
  };
  if (text.trim() === "")
    fail("the file", "empty: a CSV with a header line, then a request a line");
  const lines = text.split(/\r?\n/);
  const cols = columnIndexes(fields(lines[0] ?? ""), names, fail);
  const rows: { at: number; input: number; output: number }[] = [];
  for (let n = 1; n < lines.length; n++) {
    const line = lines[n]!;
    if (line.trim() === "") continue;
    const f = fields(line);
    const field = (i: number) => f[i] ?? "";
    const time = timeMs(field(cols.time));
    if (Number.isNaN(time))
      fail(
        `line ${n + 1}`,
        `the time ${JSON.stringify(field(cols.time))} is not a date-time (2023-11-16 18:17:03.98) or a number of seconds`,
      );
    const count = (i: number, role: string) => {
      const x = field(i);
      if (!NUMBER.test(x))
        fail(`line ${n + 1}`, `${JSON.stringify(x)} is not a count of ${role} tokens (>= 0)`);
      return Math.round(Number(x));
    };
    rows.push({
      at: time,
      input: count(cols.input, "input"),
      output: count(cols.output, "output"),
    });
  }
  if (rows.length === 0) fail("the file", "no request under the header");
  rows.sort((a, b) => a.at - b.at);
  const first = rows[0]!.at;
  return rows.map((r) => ({ atMs: r.at - first, inputTokens: r.input, outputTokens: r.output }));
}

/** `parseArrivals` of a file. */
export function loadArrivals(path: string, columns?: ArrivalColumns): Arrival[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new ArrivalsError(`arrivals ${path}: cannot be read (${(e as Error).message})`);
  }
  return parseArrivals(text, columns, `arrivals ${path}`);
}
