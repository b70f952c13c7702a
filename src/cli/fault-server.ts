import { spawn } from "node:child_process";
import { constants } from "node:os";
import { type FaultScript, type FaultServer, startFaultServer } from "../testing/index.ts";
import { integer, parse, readNamed, splitCommand, UsageError } from "./args.ts";

export const FAULT_SERVER_USAGE = `usage: breakwater fault-server [--port N] [--host 127.0.0.1|::1|localhost] [--script file.json | --fail-first N] [-- command ...]

A fault-injecting LLM provider on loopback: OpenAI chat completions, Anthropic messages,
Gemini generateContent (JSON and SSE) and a tool endpoint with an idempotency ledger.
GET /__stats for what it received; POST /__script to change the faults at run time.

With "-- command ...", it runs the command once it listens, the SDKs' base URLs and keys
pointed at it (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL and their keys),
and stops when the command ends, with the command's exit code.

  --script file.json  the faults to inject (rules, capacity, rate limits: docs/testing.md)
  --fail-first N      the first N requests of each route answer 503 (to watch a retry)`;

/** Runs the fault server until SIGINT/SIGTERM. */
export async function faultServerCommand(
  argv: string[],
  out: (s: string) => void,
): Promise<number> {
  const { own, command } = splitCommand("fault-server", argv);
  const values = parse("fault-server", own, {
    port: { type: "string" },
    host: { type: "string" },
    script: { type: "string" },
    "fail-first": { type: "string" },
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
  if (values.script !== undefined && values["fail-first"] !== undefined)
    throw new UsageError("--script and --fail-first: give one (a script can hold the same rule)");
  const failFirst = integer("fail-first", values["fail-first"], 0, 0, 1_000_000);
  const script =
    values.script !== undefined
      ? await readScript(values.script)
      : failFirst > 0
        ? { rules: [{ requests: [1, failFirst] as [number, number], status: 503 }] }
        : undefined;
  const server = await startFaultServer({
    port,
    ...(script !== undefined && { script }),
    ...(host && { host: host as "127.0.0.1" }),
  }).catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(values.script ? `--script ${values.script}: ${message}` : message);
  });
  if (command.length > 0) return runBeside(server, command);
  // Listen for the stop before saying we are up: whoever reads the banner may stop us at once.
  const stopped = new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  out(`fault server listening on ${server.url}`);
  out(`  OpenAI:    ${server.url}/v1   Anthropic: ${server.url}   Gemini: ${server.url}`);
  out(`  stats:     GET ${server.url}/__stats   script: POST ${server.url}/__script`);
  if (failFirst > 0) out(`  faults:    the first ${failFirst} requests of each route answer 503`);
  await stopped;
  await server.close();
  return 0;
}

/** The environment that points each SDK at `url`; a key already set is kept. */
export function sdkEnv(url: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    ...env,
    OPENAI_BASE_URL: `${url}/v1`,
    ANTHROPIC_BASE_URL: url,
    GOOGLE_GEMINI_BASE_URL: url,
    OPENAI_API_KEY: env.OPENAI_API_KEY ?? "test",
    ANTHROPIC_API_KEY: env.ANTHROPIC_API_KEY ?? "test",
    GEMINI_API_KEY: env.GEMINI_API_KEY ?? "test",
  };
}

/** Runs `command` against the listening server (no race: it is up before the command
 * starts), then closes it; the command's exit code is ours. */
async function runBeside(server: FaultServer, command: string[]): Promise<number> {
  try {
    return await runCommand("fault-server", command, sdkEnv(server.url, process.env));
  } finally {
    await server.close();
  }
}

/** Runs `command` with `env`, signals passed on; its exit code (a signal: 128 + its number). */
export async function runCommand(
  owner: string,
  [file, ...args]: string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const child = spawn(file!, args, { stdio: "inherit", env });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on("SIGINT", forward).on("SIGTERM", forward);
  try {
    return await new Promise<number>((resolve, reject) => {
      child.once("error", (error) =>
        reject(new UsageError(`${owner}: cannot run ${file}: ${error.message}`)),
      );
      child.once("exit", (code, signal) =>
        resolve(code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0)),
      );
    });
  } finally {
    process.off("SIGINT", forward).off("SIGTERM", forward);
  }
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
