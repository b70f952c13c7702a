import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { startFaultServer } from "../testing/index.ts";

export const FAULT_SERVER_USAGE = `usage: breakwater fault-server [--port N] [--host 127.0.0.1|::1|localhost] [--script file.json]

A fault-injecting LLM provider on loopback: OpenAI chat completions, Anthropic messages,
Gemini generateContent (JSON and SSE) and a tool endpoint with an idempotency ledger.
GET /__stats for what it received; POST /__script to change the faults at run time.`;

/** Runs the fault server until SIGINT/SIGTERM. */
export async function faultServerCommand(
  argv: string[],
  out: (s: string) => void,
): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string" },
      host: { type: "string" },
      script: { type: "string" },
      help: { type: "boolean" },
    },
    strict: true,
  });
  if (values.help) {
    out(FAULT_SERVER_USAGE);
    return 0;
  }
  const port = values.port === undefined ? 8787 : Number(values.port);
  const script =
    values.script === undefined ? undefined : JSON.parse(await readFile(values.script, "utf8"));
  const server = await startFaultServer({
    port,
    script,
    ...(values.host && { host: values.host as "127.0.0.1" }),
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
