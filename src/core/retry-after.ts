import { type HeaderBag, readHeader } from "./headers.ts";

/** The longest delay a timer can hold (setTimeout's limit): "never unbounded". */
export const MAX_DELAY_MS = 2_147_483_647;

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAY = "(?:mon|tue|wed|thu|fri|sat|sun)";
const LONG_DAY = "(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)";
const MON = "(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)";
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";
// RFC 9110 section 5.6.7: the preferred form and the two obsolete ones a recipient must accept.
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MON} (\\d{4}) ${TIME} GMT$`, "i");
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MON}-(\\d{2}) ${TIME} GMT$`, "i");
const ASCTIME = new RegExp(`^${DAY} ${MON} ([ \\d]\\d) ${TIME} (\\d{4})$`, "i");

function utc(year: number, mon: string, day: number, h: number, m: number, s: number) {
  if (day < 1 || day > 31 || h > 23 || m > 59 || s > 60) return undefined;
  const month = MONTHS.indexOf(mon.toLowerCase());
  const ms = Date.UTC(year, month, day, h, m, Math.min(s, 59));
  // Date.UTC rolls 31 Feb into March: reject dates that do not exist.
  if (new Date(ms).getUTCDate() !== day) return undefined;
  // Second 60 is a leap second (RFC 9110 5.6.7): the instant after :59, never earlier.
  return s === 60 ? ms + 1000 : ms;
}

/** Parses an HTTP-date in any of the three RFC 9110 forms; undefined if it is not one. */
export function parseHttpDate(value: string, nowMs: number): number | undefined {
  let m = IMF_FIXDATE.exec(value);
  if (m) return utc(+m[3]!, m[2]!, +m[1]!, +m[4]!, +m[5]!, +m[6]!);
  m = ASCTIME.exec(value);
  if (m) return utc(+m[6]!, m[1]!, +m[2]!.trim(), +m[3]!, +m[4]!, +m[5]!);
  m = RFC850.exec(value);
  if (m) {
    // A two-digit year more than 50 years in the future means the most recent past
    // year with those digits (RFC 9110 5.6.7).
    const nowYear = new Date(nowMs).getUTCFullYear();
    let year = Math.floor(nowYear / 100) * 100 + +m[3]!;
    if (year > nowYear + 50) year -= 100;
    return utc(year, m[2]!, +m[1]!, +m[4]!, +m[5]!, +m[6]!);
  }
  return undefined;
}

const clamp = (ms: number) => Math.min(MAX_DELAY_MS, Math.max(0, Math.ceil(ms)));
const SECONDS = /^\d+(?:\.\d+)?$/;

/** Parses one Retry-After value: delay-seconds or an HTTP-date. Anything else (a boolean,
 * a bigint, a Symbol) is no hint. */
export function parseRetryAfterValue(value: unknown, nowMs: number): number | undefined {
  if (typeof value === "number")
    return Number.isFinite(value) && value >= 0 ? clamp(value * 1000) : undefined;
  if (typeof value !== "string") return undefined;
  const v = value.trim();
  if (v === "") return undefined;
  const one = parseOne(v, nowMs);
  if (one !== undefined || !v.includes(",")) return one;
  // Two headers, merged by fetch into one list ("1, 3"): the longest wait the server asked.
  const waits = members(v)
    .map((m) => parseOne(m, nowMs))
    .filter((ms): ms is number => ms !== undefined);
  return waits.length > 0 ? Math.max(...waits) : undefined;
}

function parseOne(v: string, nowMs: number): number | undefined {
  if (SECONDS.test(v)) return clamp(Number(v) * 1000);
  const at = Number.isFinite(nowMs) ? parseHttpDate(v, nowMs) : undefined;
  return at === undefined ? undefined : clamp(at - nowMs); // a past date is 0
}

const DAY_NAME = new RegExp(`^(?:${DAY.slice(3, -1)}|${LONG_DAY.slice(3, -1)})$`, "i");

/** A merged list's members: split at its commas, but a date's own comma (after its day's
 * name: "Wed, 21 Oct 2015 07:28:00 GMT") keeps the date whole. */
function members(list: string): string[] {
  const out: string[] = [];
  const parts = list.split(",").map((p) => p.trim());
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (DAY_NAME.test(part) && i + 1 < parts.length) out.push(`${part}, ${parts[++i]}`);
    else if (part !== "") out.push(part);
  }
  return out;
}

function isHeaderBag(x: unknown): x is HeaderBag {
  return x !== null && typeof x === "object";
}

/**
 * The server's wait hint in milliseconds: `retry-after-ms` first (OpenAI, Anthropic),
 * then `Retry-After` as delay-seconds or HTTP-date. Never negative, NaN or beyond
 * MAX_DELAY_MS; a past date is 0; anything unparseable is undefined.
 */
export function parseRetryAfter(
  headersOrValue: HeaderBag | string | number | null | undefined,
  nowMs: number = Date.now(),
): number | undefined {
  if (typeof nowMs !== "number" || Number.isNaN(nowMs)) nowMs = Date.now();
  if (headersOrValue === null || headersOrValue === undefined) return undefined;
  if (!isHeaderBag(headersOrValue)) return parseRetryAfterValue(headersOrValue, nowMs);
  const ms = readHeader(headersOrValue, "retry-after-ms");
  const waits =
    ms
      ?.split(",")
      .map((m) => m.trim())
      .filter((m) => SECONDS.test(m)) ?? [];
  if (waits.length > 0) return clamp(Math.max(...waits.map(Number)));
  const ra = readHeader(headersOrValue, "retry-after");
  return ra === undefined ? undefined : parseRetryAfterValue(ra, nowMs);
}

const DURATION =
  /^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$/;

/**
 * A wait the error's text names when no header does: OpenAI's and Groq's "Please try
 * again in 17.359s" (also "6m0s", "20ms", "114h18m0s"), Gemini's "Please retry in
 * 10.689924287s". The first such phrase in `text`, in ms; undefined when none.
 */
export function parseMessageWait(text: string): number | undefined {
  const m = MESSAGE_WAIT.exec(text);
  return m ? parseResetValue(m[1]!) : undefined;
}

const MESSAGE_WAIT = /\b(?:try again|retry)\s+in\s+((?:\d+(?:\.\d+)?(?:h|ms|m(?!s)|s))+)(?![a-z])/i;

/** One rate-limit reset value: seconds ("55", Azure) or a duration ("6m0s", "20ms", OpenAI). */
export function parseResetValue(value: string): number | undefined {
  const v = value.trim();
  if (SECONDS.test(v)) return clamp(Number(v) * 1000);
  const m = v === "" ? null : DURATION.exec(v);
  if (!m || m.slice(1).every((p) => p === undefined)) return undefined;
  const [h, min, s, ms] = m.slice(1).map((p) => Number(p ?? 0)) as [number, number, number, number];
  return clamp(h * 3_600_000 + min * 60_000 + s * 1000 + ms);
}
