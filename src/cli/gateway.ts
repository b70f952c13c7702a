import { type Gateway, gateway } from "../gateway/gateway.ts";
import { integer, parse, readNamed, UsageError } from "./args.ts";

export const GATEWAY_USAGE = `usage: breakwater gateway --config gateway.json [--port N]

One retry layer for any language, behind one base URL: an HTTP server that speaks OpenAI's,
Anthropic's and Google's APIs as their SDKs send them, each model name routed to an upstream
(or a chain of them) under breakwater's policy. Point a client's base URL at it
(http://127.0.0.1:8790/v1 for OpenAI's SDKs) with one of the config's keys.
SIGHUP reloads the config without dropping calls; GET /metrics for Prometheus.

  --config file.json  listen, keys, upstreams and models (docs/gateway.md); keys as "env:NAME"
  --port N            overrides listen.port`;

/** Reads the config file: JSON, named in the error when it is not. */
async function readConfig(file: string, port: number | undefined): Promise<unknown> {
  const text = await readNamed("config", file);
  let config: Record<string, unknown>;
  try {
    config = JSON.parse(text) as Record<string, unknown>;
  } catch (error) {
    throw new UsageError(`--config ${file}: not JSON (${(error as Error).message})`);
  }
  if (port === undefined) return config;
  const listen = (config.listen ?? {}) as Record<string, unknown>;
  return { ...config, listen: { ...listen, port } };
}

/** Runs the gateway until SIGINT/SIGTERM; SIGHUP reads the config again. */
export async function gatewayCommand(argv: string[], out: (s: string) => void): Promise<number> {
  const values = parse("gateway", argv, {
    config: { type: "string" },
    port: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(GATEWAY_USAGE);
    return 0;
  }
  if (values.config === undefined) throw new UsageError("gateway: --config file.json is required");
  const file = values.config;
  const port = values.port === undefined ? undefined : integer("port", values.port, 0, 0, 65_535);
  const gw: Gateway = await gateway(await readConfig(file, port)).catch((error: unknown) => {
    throw new UsageError(`--config ${file}: ${(error as Error).message}`);
  });
  const reload = () =>
    readConfig(file, port)
      .then((c) => gw.reload(c))
      .then(
        () => out(`gateway: reloaded ${file}`),
        (error: unknown) =>
          out(`gateway: kept the config in force; ${file}: ${(error as Error).message}`),
      );
  process.on("SIGHUP", reload);
  const stopped = new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  out(`gateway listening on ${gw.url}`);
  await stopped;
  process.off("SIGHUP", reload);
  await gw.close();
  return 0;
}
