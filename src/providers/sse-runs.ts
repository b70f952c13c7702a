/**
 * Speed code, fenced in this one module: the runs and the marks. Once a stream's content
 * flows, a network read of whole events that no mark of the dialect matches carries no
 * usage and no error, so it goes on as a run (`SseRun`), neither split nor parsed; before
 * that, and for a read a mark matches, a mark tells which events are worth parsing. What
 * they save is measured in docs/benchmarks.md ("the marks and the runs"): a run or a mark
 * skipped here changes the cost of a stream, never what it reads.
 */
import type { Usage } from "../index.ts";
import type { Dialect } from "./dialect.ts";
import { cutEvents, SseEvent, startsJsonOrEnds, WHOLE } from "./sse-event.ts";

const DATA = Buffer.from("data:");

/**
 * Whole events that carry no mark (no usage, no error), as one network read brought them
 * once the stream's content flows: handed on as they came, not split or parsed, and read
 * into events only when asked (the answer so far, the checks at the end). Most of a
 * stream's chunks come this way.
 */
export class SseRun {
  /** The read's bytes, as they came. */
  readonly bytes: Uint8Array;
  #events: readonly SseEvent[] | undefined;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }

  /** Its text (decoded on each ask: a run keeps no text of its own). */
  get raw(): string {
    return WHOLE.decode(this.bytes);
  }

  /** Whether one of its events' data is not JSON (as `SseEvent.malformed` reads it): each
   * `data:` that starts a line, found natively in the bytes, the byte after it looked at
   * (inside JSON a `data:` never starts a line: a string's newline is escaped). */
  get malformed(): boolean {
    const b = Buffer.from(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
    for (let i = b.indexOf(DATA); i !== -1; i = b.indexOf(DATA, i + 5)) {
      if (i > 0 && b[i - 1] !== 10 && b[i - 1] !== 13) continue; // "metadata:" in a text
      const at = b[i + 5] === 32 ? i + 6 : i + 5;
      if (!startsJsonOrEnds(b[at] ?? Number.NaN)) return true;
    }
    return false;
  }

  /** The events in it, in order (split once, when first asked). */
  events(): readonly SseEvent[] {
    if (this.#events !== undefined) return this.#events;
    const out: SseEvent[] = [];
    const text = this.raw;
    const rest = cutEvents(text, text.indexOf("\r") === -1, (raw) => out.push(new SseEvent(raw)));
    if (rest !== "") out.push(new SseEvent(rest)); // cannot happen: a run ends an event
    this.#events = out;
    return out;
  }
}

/** What lets the reader hand whole reads on unsplit once content flows: which event is
 * content (from the read after it on), and the marks of an event that may carry usage or
 * an error (a read that matches one is split into its events, as before content). */
export interface Tail {
  content(event: SseEvent): boolean;
  readonly marks: readonly RegExp[];
  /** The marks find in a read's bytes, one character each, what they find in its text
   * (`bytewise`, below): they are tested so, skipping a UTF-8 decode. */
  readonly bytewise: boolean;
}

/** A read of whole events that no mark matches, as a run; undefined when it must be split
 * into its events (it ends mid-event, or a mark matches it). */
export function runOf(tail: Tail, bytes: Uint8Array): SseRun | undefined {
  return endsEvent(bytes) && !marked(tail, bytes) ? new SseRun(bytes) : undefined;
}

/** Whether a read ends an event: a blank line at its very end, in `\n` or `\r\n` style,
 * after a line with something on it (a read that ends in `\r` may go on with `\n` in the
 * next; in one that ends in three breaks, an earlier boundary takes part of the last
 * blank line; a read that begins with the second half of a blank line is not looked into:
 * each of these is split). */
function endsEvent(b: Uint8Array): boolean {
  const n = b.length;
  if (n < 2 || b[n - 1] !== 10) return false;
  if (b[n - 2] === 10) return !isBreak(b, n - 3);
  return b[n - 2] === 13 && n >= 4 && b[n - 3] === 10 && b[n - 4] === 13 && !isBreak(b, n - 5);
}

const isBreak = (b: Uint8Array, i: number) => i >= 0 && (b[i] === 10 || b[i] === 13);

/** Whether any mark matches a read (whole events, so whole characters): on its bytes one
 * character each where the marks read the same so, else on its text. */
function marked(tail: Tail, bytes: Uint8Array): boolean {
  const text = tail.bytewise ? LATIN1.call(bytes, 0, bytes.length) : WHOLE.decode(bytes);
  const marks = tail.marks;
  for (let i = 0; i < marks.length; i++) if (marks[i]!.test(text)) return true;
  return false;
}

/** Node's one-character-a-byte decoder (what `toString("latin1")` runs): a copy, where
 * UTF-8 decoding validates and converts (half the cost of a mark test). */
const LATIN1: (this: Uint8Array, start: number, end: number) => string =
  (Buffer.prototype as unknown as { latin1Slice?: typeof LATIN1 }).latin1Slice ??
  function (this: Uint8Array) {
    return Buffer.from(this.buffer, this.byteOffset, this.byteLength).toString("latin1");
  };

/** A dialect's marks, made once per fetch layer: each without `g` or `y` (a mark is tested
 * afresh on every event, never from where it last stopped), and both in one test where
 * they can be. */
export interface Marks {
  readonly usage: RegExp | undefined;
  readonly error: RegExp | undefined;
  /** Usage or error in one scan: none when a mark is missing or their flags differ. */
  readonly either: RegExp | undefined;
}

const afresh = (m: RegExp | undefined) =>
  m === undefined ? undefined : new RegExp(m.source, m.flags.replace(/[gy]/g, ""));

/** The dialect's marks as the fetch layer tests them. */
export function marksOf(dialect: Dialect | undefined): Marks {
  const usage = afresh(dialect?.marks?.usage);
  const error = afresh(dialect?.marks?.error);
  let either: RegExp | undefined;
  // Joined, the error mark's numbered groups would count on from the usage mark's, and a
  // back reference of its own would point at the wrong one.
  if (usage !== undefined && error !== undefined && usage.flags === error.flags && !groups(usage)) {
    try {
      either = new RegExp(`${usage.source}|${error.source}`, usage.flags);
    } catch {} // the same group name in both (V8 before 12.5): each is tested alone
  }
  return { usage, error, either };
}

/** Whether a mark has capturing groups (the empty alternative makes any source match ""). */
const groups = (m: RegExp) => new RegExp(`${m.source}|`, m.flags).exec("")!.length > 1;

/**
 * How a stream's reads may go on unsplit once content flows (`SseReader`): a read of whole
 * events that no needed mark matches carries no usage and no error, so nothing in it is
 * parsed. None when the dialect reads usage or errors with no mark for them, or with a mark
 * that may find in a read of several events less than in each alone (every event is read).
 */
export function tailOf(dialect: Dialect | undefined, marks: Marks): Tail | undefined {
  if (dialect === undefined) return undefined;
  const needed: RegExp[] = [];
  for (const [reads, mark] of [
    [dialect.usage, marks.usage],
    [dialect.inBand, marks.error],
  ] as const) {
    if (reads === undefined) continue;
    if (mark === undefined) return undefined;
    needed.push(mark);
  }
  const tested = needed.length === 2 && marks.either !== undefined ? [marks.either] : needed;
  if (!tested.every(joinable)) return undefined;
  return {
    content: (e) => dialect.isContent(e.json, e),
    marks: tested,
    bytewise: tested.every(bytewise),
  };
}

/**
 * A dialect's usage and in-band error readers behind its marks: an event a mark rules out,
 * and a run (it matched none), is not parsed. The stream asks `inBand` of a chunk before
 * `usage`: the last event neither mark matched is remembered, so `usage` does not scan its
 * text again.
 */
export function markedReads(dialect: Dialect | undefined, marks: Marks) {
  const { usage: usageMark, error: errorMark, either } = marks;
  let quiet: SseEvent | SseRun | undefined;
  return {
    usage: (e: SseEvent | SseRun): Partial<Usage> | undefined =>
      e === quiet || e instanceof SseRun || usageMark?.test(e.raw) === false
        ? undefined
        : dialect?.usage?.(e.json),
    inBand: (e: SseEvent | SseRun): unknown => {
      if (e instanceof SseRun || either?.test(e.raw) === false) {
        quiet = e;
        return undefined;
      }
      if (errorMark?.test(e.raw) === false) return undefined;
      return dialect?.inBand?.(e.json, e);
    },
  };
}

/** One atom of a mark's source: a character, or an escape (`\\` and the one after it), and
 * whether it stands inside a class (`[...]`). The two readings below walk marks so. */
interface Atom {
  readonly ch: string;
  /** The character after `\\`, for an escape. */
  readonly escaped: string | undefined;
  readonly inClass: boolean;
  /** The source's next four characters, from this atom's on. */
  readonly ahead: string;
}

function* atoms(source: string): Generator<Atom> {
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i]!;
    const ahead = source.slice(i, i + 4);
    if (ch === "\\") {
      yield { ch, escaped: source[++i] ?? "", inClass, ahead };
      continue;
    }
    yield { ch, escaped: undefined, inClass, ahead };
    if (inClass) inClass = ch !== "]";
    else inClass = ch === "[";
  }
}

/**
 * Whether a mark finds in the text of several events at once whatever it finds in each.
 * Every event in a run begins after a line break and the next one begins with a field
 * name, so what holds at an event's end alone may not hold there: not joinable are `$`
 * (the end of the whole text, or with `m` a line's end that a blank line's last break no
 * longer is), `\B`, `^` without `m` (the start of the whole text), and looking around
 * (`(?=`, `(?!`, `(?<=`, `(?<!`: across an event's edge). `^` with `m` and `\b` read the
 * same at an event's start either way.
 */
export function joinable(mark: RegExp): boolean {
  const multiline = mark.flags.includes("m");
  for (const a of atoms(mark.source)) {
    if (a.inClass) continue;
    if (a.escaped === "B" || a.ch === "$" || (a.ch === "^" && !multiline)) return false;
    if (/^\(\?(?:[=!]|<[=!])/.test(a.ahead)) return false;
  }
  return true;
}

/** Escapes that stand for ASCII characters only: escaped punctuation, the ASCII classes
 * `\s` `\d` `\w`, word edges, and the control letters. */
const ASCII_ESCAPE = /^[sdwbBfnrtv\\/.^$|?*+()[\]{}\-"'`~!@#%&=:;,<>]$/;

/**
 * Whether a mark finds in a read's bytes, one character each (latin1), whatever it finds in
 * their UTF-8 text. True of a mark written in printable ASCII (no `u` or `v` flag) whose
 * escapes stand for ASCII only (no `\u`, `\x`, octal or back references) and that takes no
 * single character of any kind (`.`, a negated class, `\S`, `\W`, `\D`): only ASCII
 * characters, the same in both texts, can then make up its match; with `m`, no `^` or `$`
 * (U+2028 ends a line of text, not of bytes). And `\s`, but for a non-ASCII space (one
 * character as text, none as bytes), which JSON never puts between its tokens.
 */
export function bytewise(mark: RegExp): boolean {
  if (/[uv]/.test(mark.flags) || !/^[\x20-\x7e]*$/.test(mark.source)) return false;
  const multiline = mark.flags.includes("m");
  for (const a of atoms(mark.source)) {
    if (a.escaped !== undefined) {
      if (!ASCII_ESCAPE.test(a.escaped)) return false;
    } else if (a.inClass) continue;
    else if (a.ch === "." || a.ahead.startsWith("[^")) return false;
    else if (multiline && (a.ch === "^" || a.ch === "$")) return false;
  }
  return true;
}
