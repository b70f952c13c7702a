import { audit, type LayerSpec } from "../index.ts";
import { integer, parse, UsageError } from "./args.ts";

export const AUDIT_USAGE = `usage: breakwater audit --layers caller:2,decorator:3,sdk:5[:baseMs] [--openai-max-retries N]
                       [--anthropic-max-retries N] [--ai-sdk-max-retries N]
                       [--temporal-maximum-attempts N] [--restate-max-retry-attempts N]
                       [--dbos-max-attempts N]

The durable engines' numbers are their own options' (an activity's RetryPolicy, a
ctx.run's, a DBOS step's with retriesAllowed); Temporal's 0 is its default, unlimited.

Multiplies the retry layers around one call: the worst-case requests per logical call and
the worst-case time spent waiting, outer layer first; flags SDKs whose retries are still on.`;

export function auditCommand(argv: string[], out: (s: string) => void): number {
  const values = parse("audit", argv, {
    layers: { type: "string" },
    "openai-max-retries": { type: "string" },
    "anthropic-max-retries": { type: "string" },
    "ai-sdk-max-retries": { type: "string" },
    "temporal-maximum-attempts": { type: "string" },
    "restate-max-retry-attempts": { type: "string" },
    "dbos-max-attempts": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(AUDIT_USAGE);
    return 0;
  }
  const retries = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    return { maxRetries: integer(name, v, 0, 0, 1_000) };
  };
  const clients = {
    ...(values["openai-max-retries"] !== undefined && {
      openai: retries("openai-max-retries", values["openai-max-retries"]),
    }),
    ...(values["anthropic-max-retries"] !== undefined && {
      anthropic: retries("anthropic-max-retries", values["anthropic-max-retries"]),
    }),
    ...(values["ai-sdk-max-retries"] !== undefined && {
      aiSdk: retries("ai-sdk-max-retries", values["ai-sdk-max-retries"]),
    }),
  };
  const report = audit(values.layers ? parseLayers(values.layers) : [], {
    ...engineFlags(values),
    ...clients,
  });
  if (report.layers.length === 0) {
    out(AUDIT_USAGE);
    return 2;
  }
  const count = (n: number) => (n === Number.POSITIVE_INFINITY ? "unlimited" : String(n));
  const secs = (ms: number) =>
    ms === Number.POSITIVE_INFINITY ? "unbounded" : `${(ms / 1000).toFixed(1)} s`;
  out("layer            attempts   worst wait");
  for (const l of report.layers)
    out(
      `${l.name.padEnd(16)} ${count(l.attempts).padStart(9)}   ${secs(l.worstWaitMs).padStart(10)}`,
    );
  out(
    `worst case: ${report.layers.map((l) => count(l.attempts)).join(" × ")} = ${count(report.worstCaseRequests)} requests per logical call, ${secs(report.worstCaseWaitMs)} of stacked backoff`,
  );
  for (const w of report.warnings) out(`warning: ${w}`);
  return report.warnings.length > 0 ? 1 : 0;
}

/** The durable engines' retry settings, from their flags (Temporal's 0: unlimited). */
function engineFlags(values: Record<string, unknown>) {
  const engine = (name: string, min: number) => {
    const v = values[name] as string | undefined;
    return v === undefined ? undefined : integer(name, v, min, min, 1_000);
  };
  const temporal = engine("temporal-maximum-attempts", 0);
  const restate = engine("restate-max-retry-attempts", 1);
  const dbos = engine("dbos-max-attempts", 1);
  return {
    ...(temporal !== undefined && { temporal: { retry: { maximumAttempts: temporal } } }),
    ...(restate !== undefined && { restate: { maxRetryAttempts: restate } }),
    ...(dbos !== undefined && { dbos: { retriesAllowed: true, maxAttempts: dbos } }),
  };
}

/** "caller:2,decorator:3,sdk:5" (optionally name:attempts:baseMs) as layers. */
export function parseLayers(text: string): LayerSpec[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const [name, attempts, base] = s.split(":");
      const n = Number(attempts);
      if (!name || !Number.isInteger(n) || n < 1)
        throw new UsageError(
          `--layers: "${s}" must be name:attempts[:baseMs] with attempts an integer >= 1`,
        );
      const baseMs = base === undefined ? undefined : Number(base);
      if (baseMs !== undefined && !(baseMs >= 0))
        throw new UsageError(`--layers: "${s}": baseMs must be a number >= 0`);
      return { name, attempts: n, ...(baseMs !== undefined && { backoff: { baseMs } }) };
    });
}
