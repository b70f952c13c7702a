/** One server-sent event and the text-level reading every stream needs: where an event
 * ends, and whether its data looks like JSON. */

/**
 * One server-sent event as it came over the wire: its raw text (passed on verbatim, so the
 * SDK parses exactly what the server sent) and, read on demand, its name and data.
 */
export class SseEvent {
  readonly raw: string;
  /** The bytes it came in, when it came as one network read of its own or as its part of
   * a read all of ASCII (passed on as they are, not encoded again). */
  readonly bytes: Uint8Array | undefined;
  #data: string | undefined;
  #event: string | undefined;
  #json: unknown;
  #parsed = false;

  constructor(raw: string, bytes?: Uint8Array) {
    this.raw = raw;
    this.bytes = bytes;
  }

  #fields(): void {
    if (this.#data !== undefined) return;
    const data: string[] = [];
    for (const line of this.raw.split(/\r\n|\r|\n/)) {
      if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5));
      else if (line.startsWith("event:")) this.#event = line.slice(6).trim();
    }
    this.#data = data.join("\n");
  }

  /** The `event:` field, if any. */
  get event(): string | undefined {
    this.#fields();
    return this.#event;
  }

  /** The `data:` lines joined. */
  get data(): string {
    this.#fields();
    return this.#data!;
  }

  /** The events it is: itself (a run holds several). */
  events(): readonly SseEvent[] {
    return [this];
  }

  /** Whether its data is not JSON where a JSON stream sends JSON: data that does not start
   * like JSON (`{`, `[`: `[DONE]` among them; an event without data is not this), or that
   * did not parse when it was parsed. Reads the text, not the fields: cheap for every event. */
  get malformed(): boolean {
    if (this.#parsed) return this.#json === undefined && !["", "[DONE]"].includes(this.data.trim());
    const raw = this.raw;
    let at: number;
    if (raw.startsWith("data:")) at = 5;
    else {
      const line = raw.indexOf("\ndata:");
      if (line === -1) return false; // no data: a comment, a keepalive
      at = line + 6;
    }
    if (raw.charCodeAt(at) === 32) at++;
    return !startsJsonOrEnds(raw.charCodeAt(at));
  }

  /** The data parsed as JSON; undefined when it is not JSON (a comment, `[DONE]`). */
  get json(): unknown {
    if (!this.#parsed) {
      this.#parsed = true;
      const d = this.data;
      // `[DONE]` is no JSON: a parse that throws costs the stream's end ~20 us.
      if (d.startsWith("{") || (d.startsWith("[") && d !== "[DONE]")) {
        try {
          this.#json = JSON.parse(d);
        } catch {}
      }
    }
    return this.#json;
  }
}

/** The end of an event: a line break and then a blank line, each in any of the three
 * styles SSE allows, mixed too (`\n\r\n`). A lone `\r` ends the first line only when no
 * `\n` follows it (else the two are one `\r\n`). */
const BOUNDARY = /(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r)/;

/** TextDecoder's options for a read that may end inside a character (made once). */
export const STREAMING = { stream: true } as const;
/** Decodes reads that hold whole characters only; a mark at their start is text. */
export const WHOLE = new TextDecoder("utf-8", { ignoreBOM: true });

/** Cuts the whole events off the front of `text`, each handed to `take` (`last`: it ends
 * the text), and returns what is left: the start of an event still to come. */
export function cutEvents(
  text: string,
  plain: boolean,
  take: (raw: string, last: boolean) => void,
): string {
  for (let end = boundaryEnd(text, plain); end !== -1; end = boundaryEnd(text, plain)) {
    take(text.slice(0, end), end === text.length);
    text = text.slice(end);
  }
  return text;
}

/** Where the first event of `buffer` ends (after its blank line), or -1. */
function boundaryEnd(buffer: string, plain: boolean): number {
  if (plain) {
    const at = buffer.indexOf("\n\n");
    return at === -1 ? -1 : at + 2;
  }
  const m = BOUNDARY.exec(buffer);
  return m === null ? -1 : m.index + m[0].length;
}

/** A data line's first character: `{` or `[` (JSON, `[DONE]`), or the line or the text
 * ends there (no data). */
export function startsJsonOrEnds(c: number): boolean {
  return c === 123 || c === 91 || c === 10 || c === 13 || Number.isNaN(c);
}
