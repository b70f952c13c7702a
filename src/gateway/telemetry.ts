import type { IncomingHttpHeaders } from "node:http";
import { ConfigError, type Observer } from "../index.ts";
import type { Wire } from "./config.ts";

/** The GenAI conventions' name of who serves each wire format (`gen_ai.provider.name`). */
const PROVIDERS: Record<Wire, string> = {
  openai: "openai",
  anthropic: "anthropic",
  google: "gcp.gemini",
};

/** The gateway's OpenTelemetry (`"otel": true`): each upstream's calls traced and measured
 * by the library's `otel()` observer on the process's global providers, inside the trace a
 * client's `traceparent` names. No breaker or budget gauges: `otel().gauges` names no
 * upstream, and a reload would register them again for each policy it makes. */
export interface Telemetry {
  /** The observer of an upstream's calls. */
  observer(wire: Wire): Observer;
  /** Runs `send` inside the trace the client's headers carry (W3C `traceparent`), if any. */
  within<T>(headers: IncomingHttpHeaders, send: () => T): T;
}

/** Loads `breakwater/otel` and `@opentelemetry/api` (an optional peer): a ConfigError naming
 * the setting when it is not installed. */
export async function telemetry(): Promise<Telemetry> {
  const [{ otel }, api] = await Promise.all([
    import("../otel/otel.ts"),
    import("@opentelemetry/api"),
  ]).catch(() => {
    throw new ConfigError("gateway config", "otel", true, "usable: install @opentelemetry/api");
  });
  const observers = new Map<Wire, ReturnType<typeof otel>>();
  const of = (wire: Wire) => {
    let o = observers.get(wire);
    if (o === undefined) observers.set(wire, (o = otel({ provider: PROVIDERS[wire] })));
    return o;
  };
  return {
    observer: of,
    within: (headers, send) =>
      api.context.with(api.propagation.extract(api.ROOT_CONTEXT, headers), send),
  };
}
