import { type Gateway, gateway } from "../gateway/gateway.ts";
import { integer, parse, readNamed, splitCommand, UsageError } from "./args.ts";
import { runCommand } from "./fault-server.ts";

export const GATEWAY_USAGE = `usage: breakwater gateway --config gateway.json|gateway.yaml [--port N] [-- command ...]

One retry layer for any language, behind one base URL: an HTTP server that speaks OpenAI's,
Anthropic's and Google's APIs as their SDKs send them, each model name routed to an upstream
(or a chain of them) under breakwater's policy. Point a client's base URL at it
(http://127.0.0.1:8790/v1 for OpenAI's SDKs) with one of the config's keys.
SIGHUP reloads the config without dropping calls; GET /metrics for Prometheus.

With "-- command ...", it runs the command once it listens, the SDKs' base URLs pointed at
it with the config's first key (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL,
their keys, and BREAKWATER_GATEWAY_URL), and stops when the command ends, with its code.

  --config file       listen, keys, upstreams and models (docs/gateway.md), as JSON, or YAML
                      for a name ending in .yaml or .yml (with the yaml package); keys as "env:NAME"
  --port N            overrides listen.port`;

/** Reads the config file: JSON, or YAML for a name ending in .yaml or .yml (with the `yaml`
 * package installed); named in the error when it does not read. */
async function readConfig(file: string, port: number | undefined): Promise<unknown> {
  const text = await readNamed("config", file);
  const config = /\.ya?ml$/i.test(file) ? await fromYaml(file, text) : fromJson(file, text);
  if (config === null || typeof config !== "object" || Array.isArray(config))
    throw new UsageError(
      `--config ${file}: not an object of settings (listen, keys, upstreams, models)`,
    );
  if (port === undefined) return config;
  const listen = ((config as Record<string, unknown>).listen ?? {}) as Record<string, unknown>;
  return { ...config, listen: { ...listen, port } };
}

function fromJson(file: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--config ${file}: not JSON (${(error as Error).message})`);
  }
}

/** YAML 1.2, its core schema: a key given twice is an error, not the last one winning;
 * anchors and aliases work (one policy for several upstreams), within the parser's bound. */
async function fromYaml(file: string, text: string): Promise<unknown> {
  const yaml = await import("yaml").catch(() => {
    throw new UsageError(
      `--config ${file}: a YAML config needs the yaml package (npm install yaml), or write it as JSON`,
    );
  });
  try {
    return yaml.parse(text, { uniqueKeys: true, prettyErrors: true });
  } catch (error) {
    throw new UsageError(`--config ${file}: not YAML (${(error as Error).message})`);
  }
}

/** Runs the gateway until SIGINT/SIGTERM; SIGHUP reads the config again. */
export async function gatewayCommand(argv: string[], out: (s: string) => void): Promise<number> {
  const { own, command } = splitCommand("gateway", argv);
  const values = parse("gateway", own, {
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
  if (command.length > 0) {
    try {
      return await runCommand("gateway", command, clientEnv(gw.url, await readConfig(file, port)));
    } finally {
      await gw.close();
    }
  }
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

/** The environment that points each SDK at the gateway, with the config's first key. */
function clientEnv(url: string, config: unknown): NodeJS.ProcessEnv {
  const first = String((config as { keys?: unknown[] }).keys?.[0] ?? "");
  const key = first.startsWith("env:") ? (process.env[first.slice(4)] ?? "") : first;
  return {
    ...process.env,
    BREAKWATER_GATEWAY_URL: url,
    OPENAI_BASE_URL: `${url}/v1`,
    ANTHROPIC_BASE_URL: url,
    GOOGLE_GEMINI_BASE_URL: url,
    OPENAI_API_KEY: key,
    ANTHROPIC_API_KEY: key,
    GEMINI_API_KEY: key,
  };
}
