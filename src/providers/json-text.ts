/** Readings of a request's JSON text that spare parsing or serializing it again: a long
 * conversation is tens of kilobytes, and every request of an agent carries it. */

const STREAM_FLAG = /"stream"\s*:\s*true/y;

/** Whether a JSON text says `"stream": true`: the regex tried only where the key is (a scan
 * for the literal is many times faster over a long conversation than the regex's). */
export function saysStream(text: string): boolean {
  for (let at = text.indexOf('"stream"'); at !== -1; at = text.indexOf('"stream"', at + 1)) {
    STREAM_FLAG.lastIndex = at;
    if (STREAM_FLAG.test(text)) return true;
  }
  return false;
}

/** `prepared` as JSON text: `text` with the keys `prepared` adds to `parsed` appended (no
 * second serialization of a long conversation), or made whole when it changes more. */
export function withKeys(
  text: string,
  parsed: Record<string, unknown>,
  prepared: Record<string, unknown>,
): string {
  const same = Object.keys(parsed).every((k) => prepared[k] === parsed[k]);
  const end = text.trimEnd();
  if (!same || !end.endsWith("}") || /^\{\s*\}$/.test(end)) return JSON.stringify(prepared);
  let tail = "";
  for (const k of Object.keys(prepared)) {
    const value = Object.hasOwn(parsed, k) ? undefined : JSON.stringify(prepared[k]);
    if (value !== undefined) tail += `,${JSON.stringify(k)}:${value}`; // undefined: omitted
  }
  return tail === "" ? text : `${end.slice(0, -1)}${tail}}`;
}
