import { once } from "node:events";
import type { ServerResponse } from "node:http";
import type { Tally } from "./runs.ts";
import type { ClientCall } from "./wires.ts";
import { streamErrorEvent } from "./wires.ts";

/** Headers that describe one hop's connection or its body's coding: never passed on (the
 * fetch layer decoded the body; this hop frames it anew). */
const HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "content-encoding",
  "set-cookie",
  "proxy-authenticate",
  "upgrade",
]);

/** The answer's headers for the client, with what the call cost so far (and its run,
 * when the request named one). */
export function headersOf(res: Response, t: Tally, extra: Record<string, string> = {}) {
  const out: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    if (!HOP.has(k)) out[k] = v;
  });
  return { ...out, ...attemptHeaders(t), ...extra };
}

/** The attempts this request sent, and its run's so far. */
export function attemptHeaders(t: Tally): Record<string, string> {
  return {
    "x-breakwater-attempts": String(t.attempts),
    "x-breakwater-run-attempts": String(t.run.stats.attempts),
  };
}

/** What the call billed, for a JSON answer's headers (a stream's is known only at its end). */
export function costHeaders(cost: { billed: number; wasted: number }): Record<string, string> {
  return {
    "x-breakwater-billed-tokens": String(cost.billed),
    "x-breakwater-wasted-tokens": String(cost.wasted),
  };
}

/** Writes `chunk`, waiting for the client to take it when its buffer is full. */
async function write(out: ServerResponse, chunk: Uint8Array | string): Promise<void> {
  if (!out.write(chunk)) await Promise.race([once(out, "drain"), once(out, "close")]);
}

/**
 * Passes a stream on as it arrives, nothing held back. A quiet stream gets an SSE comment
 * every `keepAliveMs`; a stream that breaks after content ends with an error event in the
 * client's format (never `[DONE]`, never a clean end of a cut answer). The client leaving
 * cancels the upstream's. `seen` is shown each chunk handed on.
 */
export async function pipeStream(
  body: ReadableStream<Uint8Array>,
  out: ServerResponse,
  call: ClientCall,
  keepAliveMs: number,
  seen: (chunk: Uint8Array) => void = () => {},
): Promise<"ok" | "stream-interrupted" | "left"> {
  const reader = readerOf(body);
  const quiet = keepAlive(out, keepAliveMs);
  // The client left: the upstream's stream is cancelled, and the read it ends (as done)
  // says "left", never a whole answer.
  let gone = false;
  const left = () => {
    gone = true;
    reader.return?.().catch(() => {});
  };
  out.once("close", left);
  let first = true;
  try {
    for (;;) {
      const { done, value } = await reader.next();
      if (gone || out.destroyed) {
        left();
        return "left";
      }
      if (done) return "ok";
      quiet.heard();
      seen(value);
      if (first) {
        // The first content goes out now, with the headers: Node holds a response's writes
        // until the turn ends, and the rest of a read that held many events is still to
        // be passed through the policy's reading.
        first = false;
        out.write(value);
        out.socket?.uncork();
        continue;
      }
      await write(out, value);
    }
  } catch (error) {
    if (gone || out.destroyed) return "left";
    const message = error instanceof Error ? error.message : String(error);
    out.write(streamErrorEvent(call.wire, call.operation, "stream-interrupted", message));
    return "stream-interrupted";
  } finally {
    quiet.stop();
    out.off("close", left);
    if (!out.writableEnded) out.end();
  }
}

/** An SSE comment on `out` every `ms` that nothing else was written (a quiet stream's
 * proxies and clients would take it for dead). */
function keepAlive(out: ServerResponse, ms: number) {
  let last = Date.now();
  const timer = setInterval(
    () => {
      if (Date.now() - last >= ms && !out.writableEnded) {
        out.write(": keep-alive\n\n");
        last = Date.now();
      }
    },
    Math.max(50, Math.floor(ms / 2)),
  );
  timer.unref();
  return {
    heard: () => {
      last = Date.now();
    },
    stop: () => clearInterval(timer),
  };
}

/** How a body is read: the fetch layer's stream through its own iterator, which hands its
 * events' bytes on with no web stream between (a third of a stream's cost per event
 * through the gateway) and ends a pending read when returned; any other stream through its
 * reader, whose cancel ends a pending read too (a web stream's iterator would wait for it). */
function readerOf(body: ReadableStream<Uint8Array>): AsyncIterator<Uint8Array> {
  if (Object.hasOwn(body, Symbol.asyncIterator))
    return (body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  const reader = body.getReader();
  return {
    next: () => reader.read() as Promise<IteratorResult<Uint8Array>>,
    return: async () => {
      await reader.cancel().catch(() => {});
      return { done: true, value: undefined };
    },
  };
}
