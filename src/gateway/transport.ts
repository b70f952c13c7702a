import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type RequestOptions,
  STATUS_CODES,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { pipeline, Readable } from "node:stream";
import { urlToHttpOptions } from "node:url";
import {
  brotliDecompressSync,
  createBrotliDecompress,
  createGunzip,
  createInflate,
  gunzipSync,
  inflateSync,
} from "node:zlib";
import { ReadResponse } from "../providers/read-response.ts";

/**
 * The gateway's transport to its upstreams: Node's own HTTP client under a fetch-shaped
 * function, on keep-alive agents, with no header or body timeout (the policy's timeouts
 * govern). Not the WHATWG fetch: its Request, header lists and request body stream, and
 * undici's parser and its wait of one event-loop turn before reusing an idle connection,
 * cost the gateway a third of its time per call. A JSON answer is read whole here (the
 * fetch layer reads it whole anyway) and handed on as its text; a stream's body is a web
 * stream over the response; a compressed body is decoded, as fetch would. Redirects are
 * not followed (an API does not redirect a POST), and none is asked for.
 */
export function gatewayFetch(idleMs = 4_000): typeof globalThis.fetch & { close(): void } {
  // An idle connection is closed after `idleMs`, 4 s (undici's default), before most
  // servers close theirs (Node's own closes at 5 s): a request is never sent on a socket the
  // server is closing, which would fail it (a reset) and spend an attempt. A server's own
  // `Keep-Alive: timeout=` is honoured when shorter. (The timeout is the idle one: a call in
  // flight is never cut by it.) No cap on connections: the policy's limiter paces the calls.
  const options = { keepAlive: true, scheduling: "lifo", timeout: idleMs } as const;
  const http = new HttpAgent(options);
  const https = new HttpsAgent(options);
  const targets = new Targets();
  const send = (input: string | URL | Request, init: RequestInit = {}) =>
    new Promise<Response>((resolve, reject) => {
      const href = String(input);
      const to = targets.of(href);
      const body = init.body;
      if (body !== undefined && body !== null && typeof body !== "string")
        throw new TypeError("the gateway's transport sends a body given as a string");
      const headers = headersOf(init.headers);
      if (body != null) headers["content-length"] = String(Buffer.byteLength(body));
      const req = (to.secure ? httpsRequest : httpRequest)({
        ...to.options,
        method: init.method ?? "GET",
        headers,
        agent: to.secure ? https : http,
      });
      req.once("error", reject);
      // An abort ends the request, or once the headers came the body's read, with the
      // signal's reason.
      let answering: IncomingMessage | undefined;
      const signal = init.signal;
      if (signal != null) {
        if (signal.aborted) return void req.destroy(signal.reason);
        const abort = () => (answering ?? req).destroy(signal.reason);
        signal.addEventListener("abort", abort, { once: true });
        req.once("close", () => signal.removeEventListener("abort", abort));
      }
      req.once("response", (res) => {
        answering = res;
        // An answer no fetch could hand on (a status out of range, a coding it cannot read)
        // rejects the call, its connection let go; it never throws out of this listener.
        let answered: Promise<Response>;
        try {
          answered = answer(res, href);
        } catch (error) {
          res.destroy();
          return reject(error);
        }
        answered.then(resolve, reject);
      });
      req.end(body ?? undefined);
    });
  return Object.assign(send as typeof globalThis.fetch, {
    close() {
      http.destroy();
      https.destroy();
    },
  });
}

/** Where each URL sends a request, read once: parsing a URL and turning it into a request's
 * options costs more than the rest of a request's start. */
class Targets {
  readonly #known = new Map<string, { secure: boolean; options: RequestOptions }>();

  of(href: string) {
    let to = this.#known.get(href);
    if (to !== undefined) return to;
    const url = new URL(href);
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new TypeError(
        `the gateway's transport sends over http: and https:, not ${url.protocol}`,
      );
    to = { secure: url.protocol === "https:", options: urlToHttpOptions(url) };
    if (this.#known.size >= 1_000) this.#known.clear(); // bounded: a route has few URLs
    this.#known.set(href, to);
    return to;
  }
}

/** The answer to a request sent to `url`, as fetch would hand it. */
function answer(res: IncomingMessage, url: string): Promise<Response> {
  const status = res.statusCode ?? 0;
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  const type = headers.get("content-type") ?? "";
  if (NO_BODY.has(status)) {
    res.resume();
    return Promise.resolve(new Response(null, { status, headers }));
  }
  if (type.includes("event-stream")) {
    const body = Readable.toWeb(decoding(res, headers)) as ReadableStream<Uint8Array>;
    return Promise.resolve(new Response(body, { status, headers }));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.once("error", reject);
    res.once("end", () => {
      try {
        const all = decoded(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), headers);
        if (!type.includes("json"))
          return resolve(new Response(new Uint8Array(all), { status, headers }));
        // JSON is handed on as its text, read once (no body stream built, no bytes copied).
        const statusText = STATUS_CODES[status] ?? "";
        const head = { status, statusText, headers, url, redirected: false };
        resolve(new ReadResponse(all.toString("utf8"), head, undefined));
      } catch (error) {
        reject(error);
      }
    });
  });
}

const NO_BODY = new Set([204, 205, 304]);

/** The coding a body came in, taken off the headers (what is handed on is decoded), or
 * undefined when it came as it is. */
function codingOf(headers: Headers): string | undefined {
  const coding = headers.get("content-encoding")?.trim().toLowerCase();
  if (coding === undefined || coding === "identity") return undefined;
  if (!DECODERS.has(coding))
    throw new TypeError(`an answer in a content-encoding the gateway cannot read: ${coding}`);
  headers.delete("content-encoding");
  headers.delete("content-length");
  return coding;
}

const DECODERS = new Set(["gzip", "x-gzip", "br", "deflate"]);

/** A whole body as its `content-encoding` says. */
function decoded(body: Buffer, headers: Headers): Buffer {
  const coding = codingOf(headers);
  if (coding === undefined || body.length === 0) return body;
  if (coding === "br") return brotliDecompressSync(body);
  if (coding === "deflate") return inflateSync(body);
  return gunzipSync(body);
}

/** A streamed body as its `content-encoding` says, decoded as it comes. */
function decoding(res: IncomingMessage, headers: Headers): Readable {
  const coding = codingOf(headers);
  if (coding === undefined) return res;
  const decoder =
    coding === "br"
      ? createBrotliDecompress()
      : coding === "deflate"
        ? createInflate()
        : createGunzip();
  // Either end going takes the other with it: a body cancelled lets its connection go.
  return pipeline(res, decoder, () => {});
}

/** A request's headers as Node's client takes them. */
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
