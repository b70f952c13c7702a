import { type FaultScript, startFaultServer } from "../testing/index.ts";
import { integer, parse, readNamed, UsageError } from "./args.ts";

export const FAULT_SERVER_USAGE = `usage: breakwater fault-server [--port N] [--host 127.0.0.1|::1|localhost] [--script file.json]

A fault-injecting LLM provider on loopback: OpenAI chat completions, Anthropic messages,
Gemini generateContent (JSON and SSE) and a tool endpoint with an idempotency ledger.
GET /__stats for what it received; POST /__script to change the faults at run time.`;

/** Runs the fault server until SIGINT/SIGTERM. */
export async function faultServerCommand(
  argv: string[],
  out: (s: string) => void,
): Promise<number> {
  const values = parse("fault-server", argv, {
    port: { type: "string" },
    host: { type: "string" },
    script: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(FAULT_SERVER_USAGE);
    return 0;
  }
  const port = integer("port", values.port, 8787, 0, 65_535);
  const host = values.host;
  if (host !== undefined && !["127.0.0.1", "::1", "localhost"].includes(host))
    throw new UsageError(
      `--host must be 127.0.0.1, ::1 or localhost (loopback only); got ${JSON.stringify(host)}`,
    );
  const script = values.script === undefined ? undefined : await readScript(values.script);
  const server = await startFaultServer({
    port,
    ...(script !== undefined && { script }),
    ...(host && { host: host as "127.0.0.1" }),
  }).catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(values.script ? `--script ${values.script}: ${message}` : message);
  });
  out(`fault server listening on ${server.url}`);
  out(`  OpenAI:    ${server.url}/v1   Anthropic: ${server.url}   Gemini: ${server.url}`);
  out(`  stats:     GET ${server.url}/__stats   script: POST ${server.url}/__script`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await server.close();
  return 0;
}

/** A script file: JSON, named in the error when it is not. */
async function readScript(file: string): Promise<FaultScript> {
  const text = await readNamed("script", file);
  try {
    return JSON.parse(text) as FaultScript;
  } catch (error) {
    throw new UsageError(`--script ${file}: not JSON (${(error as Error).message})`);
  }
}
