import type { Dialect } from "./dialect.ts";
import type { Tail } from "./sse.ts";

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
