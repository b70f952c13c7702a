import { createHash } from "node:crypto";

/** An answer the gateway handed a client whole: what a replay hands the next. */
export interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** What a request carrying an `Idempotency-Key` does (`Replays.begin`). */
export type Turn =
  /** The first with its key: it goes upstream, and `done` stores what it answered. */
  | { readonly kind: "first"; readonly done: (answer: Answer | undefined) => void }
  /** Answered before: the answer again, nothing sent. */
  | { readonly kind: "replay"; readonly answer: Answer }
  /** The first with its key is under way: wait for it, then begin again. */
  | { readonly kind: "wait"; readonly settled: Promise<void> }
  /** The key came with another body: refused, nothing sent. */
  | { readonly kind: "mismatch" };

type Entry =
  | { readonly digest: string; readonly running: Promise<void>; readonly at: number }
  | { readonly digest: string; readonly answer: Answer; readonly at: number };

/** A key as a client may send it: 1 to 255 printable ASCII characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * The answers the gateway gave to requests with an `Idempotency-Key`, by the client's own
 * key, the route and that key: a client that sends the same request again (its SDK's retry,
 * a worker restarted mid-call) gets the same answer, and the upstream is asked once. Only a
 * whole 2xx answer is kept (an error or a cut stream may be asked again: the library's rules
 * on what is safe to send again apply to it then); one asked again while the first is under
 * way waits for it. Kept `ttlMs`, within `maxBytes` in all (the oldest go first; an answer
 * over a sixteenth of it is not kept).
 */
export class Replays {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxBytes: number;
  #bytes = 0;

  constructor(ttlMs: number, maxBytes: number) {
    this.#ttlMs = ttlMs;
    this.#maxBytes = maxBytes;
  }

  /** What the request `body` with `key` (already scoped to its client and route) does. */
  begin(key: string, body: string, now = Date.now()): Turn {
    this.#expire(now);
    const digest = createHash("sha256").update(body).digest("base64");
    const found = this.#entries.get(key);
    if (found !== undefined) {
      if (found.digest !== digest) return { kind: "mismatch" };
      return "answer" in found
        ? { kind: "replay", answer: found.answer }
        : { kind: "wait", settled: found.running };
    }
    let settle!: () => void;
    const running = new Promise<void>((r) => {
      settle = r;
    });
    this.#entries.set(key, { digest, running, at: now });
    const done = (answer: Answer | undefined) => {
      this.#entries.delete(key);
      if (answer !== undefined && answer.body.length <= this.maxAnswerBytes) {
        this.#entries.set(key, { digest, answer, at: Date.now() });
        this.#bytes += answer.body.length;
        this.#trim();
      }
      settle();
    };
    return { kind: "first", done };
  }

  /** The largest answer kept. */
  get maxAnswerBytes(): number {
    return this.#maxBytes / 16;
  }

  /** Answers kept now. */
  get size(): number {
    return this.#entries.size;
  }

  /** Drops the answers older than the TTL (the Map is in the order they were kept). */
  #expire(now: number): void {
    for (const [key, e] of this.#entries) {
      if (now - e.at < this.#ttlMs) break;
      if (!("answer" in e)) continue; // under way: its own end removes it
      this.#drop(key, e);
    }
  }

  /** Drops the oldest answers until the rest fit `maxBytes`. */
  #trim(): void {
    for (const [key, e] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      if ("answer" in e) this.#drop(key, e);
    }
  }

  #drop(key: string, e: Entry & { answer: Answer }): void {
    this.#entries.delete(key);
    this.#bytes -= e.answer.body.length;
  }
}
