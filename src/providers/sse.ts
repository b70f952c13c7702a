/**
 * One server-sent event as it came over the wire: its raw text (passed on verbatim, so the
 * SDK parses exactly what the server sent) and, read on demand, its name and data.
 */
export class SseEvent {
  readonly raw: string;
  #data: string | undefined;
  #event: string | undefined;
  #json: unknown;
  #parsed = false;

  constructor(raw: string) {
    this.raw = raw;
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

  /** The data parsed as JSON; undefined when it is not JSON (a comment, `[DONE]`). */
  get json(): unknown {
    if (!this.#parsed) {
      this.#parsed = true;
      const d = this.data;
      if (d.startsWith("{") || d.startsWith("[")) {
        try {
          this.#json = JSON.parse(d);
        } catch {}
      }
    }
    return this.#json;
  }
}

/** The end of an event: a blank line in any of the three line-break styles SSE allows. */
const BOUNDARY = /\r\n\r\n|\n\n|\r\r/;

/**
 * Splits a byte stream into events. A trailing piece with no blank line after it is still
 * yielded (some servers end without one), so no byte the server sent is dropped.
 */
export async function* sseEvents(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of chunksOf(body)) {
    buffer += decoder.decode(bytes, { stream: true });
    for (let m = BOUNDARY.exec(buffer); m !== null; m = BOUNDARY.exec(buffer)) {
      const end = m.index + m[0].length;
      yield new SseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end);
    }
  }
  buffer += decoder.decode();
  if (buffer !== "") yield new SseEvent(buffer);
}

/** A body's chunks; a ReadableStream read through its reader where it is not iterable. */
async function* chunksOf(
  body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  if (Symbol.asyncIterator in body) {
    yield* body as AsyncIterable<Uint8Array>;
    return;
  }
  const reader = (body as ReadableStream<Uint8Array>).getReader();
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) yield r.value;
  } finally {
    await reader.cancel().catch(() => {});
  }
}
