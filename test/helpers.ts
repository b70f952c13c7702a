import type { VirtualClock } from "../src/core/clock.ts";
import {
  type FaultServer,
  type FaultServerOptions,
  startFaultServer,
} from "../src/testing/fault-server/server.ts";

/** An error shaped like an SDK's HTTP error. */
export function httpError(status: number, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(`HTTP ${status}`), { status, ...extra });
}

export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Fires virtual timers one at a time until `p` settles; fails if it can never settle. */
export async function drive<T>(clock: VirtualClock, p: Promise<T>): Promise<Settled<T>> {
  let done = false;
  const out = p.then(
    (value): Settled<T> => ({ ok: true, value }),
    (error): Settled<T> => ({ ok: false, error }),
  );
  void out.finally(() => {
    done = true;
  });
  for (let i = 0; i < 100_000 && !done; i++) {
    const fired = await clock.runAll(1);
    if (fired === 0 && !done) {
      await new Promise((r) => setImmediate(r));
      if (!done && clock.pending === 0)
        throw new Error("drive: the promise is stuck (no timers left)");
    }
  }
  return out;
}

/** Drives `p` and returns its rejection; fails the test if it resolved. */
export async function driveError(clock: VirtualClock, p: Promise<unknown>): Promise<unknown> {
  const r = await drive(clock, p);
  if (r.ok) throw new Error(`expected a rejection, got ${JSON.stringify(r.value)}`);
  return r.error;
}

/** Runs `body` against a fault server of its own, closed after it: what tests that run side
 * by side each need (one's script and counts are not another's). */
export async function onFaultServer<T>(
  body: (server: FaultServer) => Promise<T>,
  options?: FaultServerOptions,
): Promise<T> {
  const server = await startFaultServer(options);
  try {
    return await body(server);
  } finally {
    await server.close();
  }
}
