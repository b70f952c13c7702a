/** Whether the undici package can be loaded (checked without loading it). */
export function hasUndici(): boolean {
  try {
    import.meta.resolve("undici");
    return true;
  } catch {
    return false;
  }
}

/** A fetch and the dispatcher to hand it. */
export interface Transport {
  readonly fetch: typeof globalThis.fetch;
  readonly dispatcher: unknown;
}

/**
 * The transport under the default fetch: undici's fetch on an Agent whose header and body
 * timeouts are off, so the policy's deadline and attempt timeouts govern a slow answer
 * (Node's own fetch ends any call at 300 s), and, given `connectMs`, a connect timeout kept
 * by our own timer (undici's checks on a one-second tick: 200 ms would fire after a second).
 */
export async function undiciTransport(connectMs: number | undefined): Promise<Transport> {
  const undici = await import("undici");
  const connect = connectMs === undefined ? undefined : timedConnector(undici, connectMs);
  return {
    fetch: undici.fetch as unknown as typeof globalThis.fetch,
    dispatcher: new undici.Agent({
      headersTimeout: 0,
      bodyTimeout: 0,
      ...(connect && { connect }),
    }),
  };
}

/** undici's connector, given up after `connectMs` by our own timer. */
function timedConnector(
  undici: typeof import("undici"),
  connectMs: number,
): import("undici").buildConnector.connector {
  const base = undici.buildConnector({ timeout: 0 });
  return (opts, callback) => {
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      socket?.destroy();
      callback(
        new undici.errors.ConnectTimeoutError(`connect timed out after ${connectMs} ms`),
        null,
      );
    }, connectMs);
    // undici's connector returns the socket it opens, though its type says void.
    const socket = base(opts, (error, connected) => {
      clearTimeout(timer);
      if (settled) return void connected?.destroy();
      settled = true;
      if (error) callback(error, null);
      else callback(null, connected!);
    }) as unknown as { destroy(): void } | undefined;
  };
}

/** How each request goes out: the attempt header and the transport. */
export interface Wire {
  /** The header that carries the attempt number (`false`: none). */
  readonly attemptHeader?: string | false | undefined;
  readonly connectTimeoutMs?: number | undefined;
  /** The fetch to send with. Default: the global fetch (on undici's, when installed). */
  readonly fetch?: typeof globalThis.fetch | undefined;
}

/**
 * Sends requests as `w` says: the attempt number in its header (in
 * `x-stainless-retry-count`, as the retries so far, where the openai and anthropic SDKs
 * already send it), over undici with no 300 s limit and the connect timeout when undici is
 * installed. `attempt` undefined: no header.
 */
export function wire(
  w: Wire,
): (
  url: string,
  init: RequestInit,
  attempt: number | undefined,
  signal?: AbortSignal,
) => Promise<Response> {
  const userFetch = w.fetch !== undefined && w.fetch !== globalThis.fetch;
  const base = w.fetch ?? globalThis.fetch;
  const header = w.attemptHeader ?? "x-retry-attempt";
  const connectMs = w.connectTimeoutMs;
  // undici is an optional peer: with it, the default transport has no 300 s limit.
  const transport: Promise<Transport> | undefined =
    (!userFetch || connectMs !== undefined) && hasUndici() ? undiciTransport(connectMs) : undefined;
  // Not async: the common case hands on the fetch's own promise, with no tick between.
  return (url, init, attempt, signal) => {
    try {
      return send(url, init, attempt, signal);
    } catch (error) {
      return Promise.reject(error); // a bad header, a fetch that throws: as a failed send
    }
  };
  function send(
    url: string,
    init: RequestInit,
    attempt: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    const headers = attempt === undefined ? init.headers : numbered(init.headers, attempt, header);
    // One copy of the request's init per attempt, and none when nothing changed.
    let sent: RequestInit & { dispatcher?: unknown } = init;
    if (headers !== init.headers || signal !== undefined || transport !== undefined) {
      sent = { ...init, headers };
      if (signal !== undefined) sent.signal = signal;
    }
    // A fetch's own promise is handed on as it is (`Promise.resolve` of one is itself).
    if (transport === undefined) return Promise.resolve(base(url, sent));
    return transport.then((t) => {
      sent.dispatcher = t.dispatcher;
      return (userFetch ? base : t.fetch)(url, sent);
    });
  }
}

/** The request's headers, numbered as attempt `attempt`: the SDKs hand a Headers of their
 * own, made for this request, so the number is set there rather than on a copy; and
 * `x-stainless-retry-count`, where they send it, already says 0 on a first attempt. */
function numbered(
  given: RequestInit["headers"],
  attempt: number,
  header: string | false,
): RequestInit["headers"] {
  const headers = given instanceof Headers ? given : new Headers(given);
  const retries = headers.get("x-stainless-retry-count");
  if (retries !== null) {
    const said = String(attempt - 1);
    if (retries !== said) headers.set("x-stainless-retry-count", said);
  } else if (header !== false) headers.set(header, String(attempt));
  return headers;
}
