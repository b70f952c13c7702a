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
