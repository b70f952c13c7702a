import { layerMark } from "../core/layer-mark.ts";
import type { LayerSpec } from "./audit.ts";

/** The durable engines' retry settings, as `audit` reads them (their own option names). */
export interface EngineSettings {
  /** Temporal: the activity's RetryPolicy (`proxyActivities({ retry })`), and the activity
   * function, when breakwater/temporal made it (`activity(...)`). */
  temporal?: {
    retry?: {
      maximumAttempts?: number;
      initialInterval?: number;
      backoffCoefficient?: number;
      maximumInterval?: number;
    };
    activity?: unknown;
  };
  /** Restate: the options of a `ctx.run` around a model call that you wrote yourself; a
   * call inside breakwater/restate's `run` has no such layer (its legs never retry a
   * failure). Unset attempts: the server's default retry policy. */
  restate?: {
    maxRetryAttempts?: number;
    initialRetryInterval?: number;
    retryIntervalFactor?: number;
    maxRetryInterval?: number;
  };
  /** DBOS: a step's configuration (`DBOS.runStep(fn, config)`); breakwater/dbos's `step`
   * runs with `retriesAllowed: false`. */
  dbos?: {
    retriesAllowed?: boolean;
    maxAttempts?: number;
    intervalSeconds?: number;
    backoffRate?: number;
  };
}

/** The attempts of restate-server 1.7's default retry policy, which a `ctx.run` without
 * its own follows: 70, then the invocation is paused (`restate-server --dump-config`,
 * [default-retry-policy]). */
const RESTATE_DEFAULT_ATTEMPTS = 70;

const num = (x: unknown, fallback: number) => (typeof x === "number" && x > 0 ? x : fallback);

/** Temporal's layer: breakwater's mapping (its retries follow breakwater's waits: 1×), or
 * the RetryPolicy as written (Temporal's default: unlimited, 1 s doubling to 100 s). */
function temporal(t: NonNullable<EngineSettings["temporal"]>, warn: (w: string) => void) {
  const r = t.retry ?? {};
  const base = num(r.initialInterval, 1_000);
  const backoff = {
    baseMs: base,
    factor: num(r.backoffCoefficient, 2),
    capMs: num(r.maximumInterval, 100 * base),
    jitter: "none" as const,
  };
  if (layerMark(t.activity)?.owner === "temporal")
    return { name: "temporal (breakwater's mapping)", attempts: 1, backoff };
  const attempts = num(r.maximumAttempts, Number.POSITIVE_INFINITY);
  warn(
    `Temporal retries every activity failure (maximumAttempts ${attempts === Number.POSITIVE_INFINITY ? "unlimited" : attempts}), a 400 included: build the activity with breakwater/temporal's activity() and retry: retryPolicy()`,
  );
  return { name: "temporal", attempts, backoff };
}

/** The engines' layers, outermost: they run the SDK's and the framework's calls. */
export function engineLayers(e: EngineSettings, warnings: string[]): LayerSpec[] {
  const out: LayerSpec[] = [];
  const warn = (w: string) => warnings.push(w);
  if (e.temporal) out.push(temporal(e.temporal, warn));
  if (e.restate) {
    const r = e.restate;
    const attempts = num(r.maxRetryAttempts, RESTATE_DEFAULT_ATTEMPTS);
    const baseMs = num(r.initialRetryInterval, 50);
    out.push({
      name: "restate ctx.run",
      attempts,
      backoff: {
        baseMs,
        factor: num(r.retryIntervalFactor, 2),
        capMs: num(r.maxRetryInterval, 10_000),
        jitter: "none",
      },
    });
    if (attempts > 1)
      warn(
        `a Restate ctx.run around a model call retries it (${attempts} attempts) and multiplies with the SDK's: use breakwater/restate's run(ctx, name, fn)`,
      );
  }
  if (e.dbos?.retriesAllowed === true) {
    const d = e.dbos;
    const attempts = num(d.maxAttempts, 3);
    const baseMs = 1_000 * num(d.intervalSeconds, 1);
    out.push({
      name: "dbos step",
      attempts,
      backoff: { baseMs, factor: num(d.backoffRate, 2), jitter: "none" },
    });
    if (attempts > 1)
      warn(
        `a DBOS step with retriesAllowed retries every failure (${attempts} attempts, no Retry-After): use breakwater/dbos's step(name, fn)`,
      );
  }
  return out;
}
