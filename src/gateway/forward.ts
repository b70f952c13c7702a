import { AsyncLocalStorage } from "node:async_hooks";
import {
  fallback,
  type GiveUpReason,
  HttpError,
  isBreakwaterError,
  type Policy,
  type Pool,
  pool,
  type Run,
  reasonOf,
} from "../index.ts";
import { waitOf } from "../internal.ts";
import { safeJson } from "../providers/dialect.ts";
import { BODY_JSON, callOptions } from "../providers/fetch.ts";
import type { UpstreamConfig } from "./config.ts";
import { type ClientCall, FORWARDED_HEADERS, upstreamAuth } from "./wires.ts";

/** An upstream as the gateway calls it: its policy and the fetch layer over it. */
export interface LiveUpstream extends Omit<UpstreamConfig, "policy"> {
  readonly name: string;
  readonly key: string;
  readonly policy: Policy;
  /** The policy's options as configured (a reload that keeps them keeps the policy). */
  readonly settings: UpstreamConfig["policy"];
  readonly fetch: typeof globalThis.fetch;
}

/** One hop of a route: the upstream, and the model asked of it. */
export interface Hop {
  readonly up: LiveUpstream;
  readonly model: string;
}

/** The request to `hop`: its URL, the upstream's own key, the client's forwarded headers. */
function requestTo(
  hop: Hop,
  call: ClientCall,
  client: Record<string, string | string[] | undefined>,
) {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    ...upstreamAuth(hop.up.wire, hop.up.key),
  };
  for (const h of FORWARDED_HEADERS) {
    const v = client[h];
    if (typeof v === "string") headers[h] = v;
  }
  const body = call.bodyFor(hop.model);
  const init = { method: "POST", headers, body };
  return {
    url: `${hop.up.baseUrl}${call.upstreamPath(hop.model)}`,
    init: Object.assign(init, { [BODY_JSON]: { text: body, json: call.jsonFor(hop.model) } }),
  };
}

/**
 * Sends a client's call along its route under the library's policy: one upstream through
 * its fetch layer (retried there, its stream retried until content), or a chain that moves
 * on when one upstream cannot take the call (`fallback`). Resolves with the answer to hand
 * the client (a non-2xx one is the provider's own, when the policy gave up on it); rejects
 * with a give-up of breakwater's own.
 */
export function send(
  hops: readonly Hop[],
  call: ClientCall,
  client: Headers,
  signal: AbortSignal,
  run: Run,
  pooled?: Pool<Response>,
): Promise<Response> {
  if (pooled === undefined && hops.length === 1) {
    const { url, init } = requestTo(hops[0]!, call, client);
    return hops[0]!.up.fetch(url, { ...init, signal, ...callOptions({ run }).fetchOptions });
  }
  const answered =
    pooled === undefined
      ? fallback<Response>(
          hops.map((hop, i) => ({
            name: `${hop.up.name}:${i}`,
            policy: hop.up.policy,
            call: (a) => hopCall(hop, call, client, a.signal),
          })),
        ).execute({ signal, run })
      : inFlight.run({ call, client }, () => pooled.execute({ signal, run }));
  return answered.catch((error: unknown) => {
    const answer = providerAnswer(error);
    if (answer !== undefined) return answer;
    throw error;
  });
}

type Headers = Record<string, string | string[] | undefined>;

/** One attempt at a chain's or a pool's upstream: an answer, or (not 2xx) an error the
 * chain classifies, carrying the answer as it came (to move on, or to hand it back). */
async function hopCall(hop: Hop, call: ClientCall, client: Headers, signal: AbortSignal) {
  const { url, init } = requestTo(hop, call, client);
  const res = await hop.up.fetch(url, { ...init, signal });
  if (res.ok) return res;
  const text = await res.text();
  throw Object.assign(new HttpError(res.status, res.headers, safeJson(text) ?? text), { text });
}

/** The request a pool's deployments are called with: a pool lives across requests (its
 * cooldowns and its picks are what it learned), so its members read the request in flight
 * here. */
const inFlight = new AsyncLocalStorage<{ call: ClientCall; client: Headers }>();

/** A pool over `targets` (`pool`'s rules), each asked for its own model or the client's. */
export function poolOf(targets: readonly { up: LiveUpstream; model?: string }[]): Pool<Response> {
  return pool<Response>(
    targets.map((t, i) => ({
      name: `${t.up.name}:${i}`,
      policy: t.up.policy,
      call: (a) => {
        const { call, client } = inFlight.getStore()!;
        return hopCall({ up: t.up, model: t.model ?? call.model ?? "" }, call, client, a.signal);
      },
    })),
  );
}

/** The provider's own answer a chain gave up on (an error that carries its status and
 * text), as the response to hand the client. */
function providerAnswer(error: unknown): Response | undefined {
  if (isBreakwaterError(error)) return undefined;
  const e = error as { status?: unknown; text?: unknown; headers?: unknown } | null;
  if (typeof e?.status !== "number" || e.status < 400 || typeof e.text !== "string")
    return undefined;
  const headers = e.headers instanceof Headers ? e.headers : new Headers();
  return new Response(e.text, { status: e.status, headers });
}

/** How a give-up of breakwater's own answers a client: its status, our code, a wait. */
export function refusal(error: unknown): { status: number; reason: string; retryAfterMs?: number } {
  const reason: GiveUpReason | "failed" = reasonOf(error) ?? "failed";
  const wait = waitOf(error); // also through a class that wraps breakwater's error
  const status =
    reason === "rate-limit-wait" || reason === "retry-after-too-long"
      ? 429
      : reason === "deadline" || reason === "attempt-timeout" || reason === "run-deadline"
        ? 504
        : reason === "not-retryable" || reason === "failed"
          ? 502
          : 503;
  return { status, reason, ...(wait !== undefined && { retryAfterMs: wait }) };
}
