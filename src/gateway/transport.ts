import { STATUS_CODES } from "node:http";
import { Readable } from "node:stream";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import { ReadResponse } from "../providers/read-response.ts";
import { hasUndici, undiciTransport } from "../providers/transport.ts";

/**
 * The gateway's transport to its upstreams: undici's `request` (its dispatcher API) under a
 * fetch-shaped function, with no header or body timeout (the policy's timeouts govern), in
 * place of undici's WHATWG `fetch`, whose Request, header lists and body streams cost the
 * gateway a third of its time per call. A JSON answer is read whole here (the fetch layer
 * reads it whole anyway); a stream goes through undici's fetch. Undefined without undici.
 */
export async function leanFetch(): Promise<typeof globalThis.fetch | undefined> {
  if (!hasUndici()) return undefined;
  const [undici, own] = await Promise.all([import("undici"), undiciTransport(undefined)]);
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    // The fetch layer's own dispatcher when it hands one (a connect timeout), else the one
    // the library's transport makes (no header or body timeout).
    const dispatcher = ((init as { dispatcher?: unknown }).dispatcher ?? own.dispatcher) as never;
    // A stream's events go on through undici's own fetch: its body is a web stream already,
    // where converting a Node stream costs each event more than the request saves.
    if (streams(String(input), init.body))
      return own.fetch(String(input), { ...init, dispatcher } as RequestInit);
    const r = await undici.request(String(input), {
      method: (init.method ?? "GET") as "POST",
      headers: headersOf(init.headers),
      body: init.body as string | undefined,
      signal: init.signal ?? undefined,
      dispatcher,
    });
    const headers = new Headers();
    for (const [k, v] of Object.entries(r.headers)) {
      if (v === undefined) continue;
      if (Array.isArray(v)) for (const one of v) headers.append(k, one);
      else headers.append(k, v);
    }
    const status = r.statusCode;
    if (status < 200 || status > 599) {
      r.body.destroy();
      throw new TypeError(`an answer with status ${status}, which no fetch can hand on`);
    }
    if ((headers.get("content-type") ?? "").includes("event-stream"))
      return new Response(Readable.toWeb(r.body) as ReadableStream<Uint8Array>, {
        status,
        headers,
      });
    const body = decoded(Buffer.from(await r.body.arrayBuffer()), headers);
    if (NO_BODY.has(status)) return new Response(null, { status, headers });
    // JSON is handed on as its text, read once (no body stream built, no bytes copied).
    if ((headers.get("content-type") ?? "").includes("json")) {
      const head = {
        status,
        statusText: STATUS_CODES[status] ?? "",
        headers,
        url: String(input),
        redirected: false,
      };
      return new ReadResponse(body.toString("utf8"), head, undefined);
    }
    return new Response(new Uint8Array(body), { status, headers });
  }) as typeof globalThis.fetch;
}

/** Whether a request asks for a stream: `"stream": true` in its body (OpenAI's, Anthropic's
 * APIs), or Gemini's `:streamGenerateContent`. */
function streams(url: string, body: unknown): boolean {
  return url.includes(":streamGenerateContent") || (typeof body === "string" && STREAM.test(body));
}
const STREAM = /"stream"\s*:\s*true/;

const NO_BODY = new Set([204, 205, 304]);

/** A body as its `content-encoding` says (fetch decodes it; undici's request does not). */
function decoded(body: Buffer, headers: Headers): Buffer {
  const coding = headers.get("content-encoding")?.trim().toLowerCase();
  if (coding === undefined || coding === "identity" || body.length === 0) return body;
  headers.delete("content-encoding"); // what is handed on is decoded
  if (coding === "gzip" || coding === "x-gzip") return gunzipSync(body);
  if (coding === "br") return brotliDecompressSync(body);
  if (coding === "deflate") return inflateSync(body);
  throw new TypeError(`an answer in a content-encoding the gateway cannot read: ${coding}`);
}

/** A request's headers as undici's request takes them. */
function headersOf(given: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (given === undefined) return out;
  if (given instanceof Headers)
    given.forEach((v, k) => {
      out[k] = v;
    });
  else if (Array.isArray(given))
    for (const [k, v] of given) {
      const name = k!.toLowerCase();
      out[name] = out[name] === undefined ? v! : `${out[name]}, ${v}`;
    }
  else for (const [k, v] of Object.entries(given)) out[k.toLowerCase()] = v;
  return out;
}
