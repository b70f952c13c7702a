#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { parse, UsageError } from "./args.ts";
import { AUDIT_USAGE, auditCommand } from "./audit.ts";
import { demo } from "./demo.ts";
import { FAULT_SERVER_USAGE, faultServerCommand } from "./fault-server.ts";
import { GATEWAY_USAGE, gatewayCommand } from "./gateway.ts";
import { STORM_USAGE, stormCommand } from "./storm.ts";

const DEMO_USAGE = `usage: breakwater demo

One policy driving a flaky fake model in virtual time: each attempt, wait, failure class
and the ledger.`;

const USAGE = `usage: breakwater <command> [options]     (breakwater <command> --help, breakwater --version)

commands:
  storm          simulate an outage and compare retry stacks (the main job)
  fault-server   a fault-injecting LLM provider on loopback
  gateway        one retry layer for any language, behind one base URL
  audit          multiply the retry layers around a call; flag hidden SDK retries
  demo           a flaky fake model driven by one policy, in virtual time

${STORM_USAGE}

${FAULT_SERVER_USAGE}

${GATEWAY_USAGE}

${AUDIT_USAGE}

${DEMO_USAGE}
`;

const out = (s: string) => process.stdout.write(`${s}\n`);

// A reader that stops reading (`breakwater storm --markdown | head`) ends the command quietly,
// as Unix tools do, not with an unhandled EPIPE.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(0);
});

/** This package's version, from its package.json (two levels up from src/cli or dist/cli). */
function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  return String(pkg.version);
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "storm":
      return stormCommand(rest, out);
    case "fault-server":
      return faultServerCommand(rest, out);
    case "gateway":
      return gatewayCommand(rest, out);
    case "audit":
      return auditCommand(rest, out);
    case "demo":
      if (parse("demo", rest, { help: { type: "boolean", short: "h" } }).help) out(DEMO_USAGE);
      else await demo(out);
      return 0;
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return 0;
    case "version":
    case "--version":
    case "-v":
      out(version());
      return 0;
    case undefined:
      process.stderr.write(USAGE);
      return 2;
    default:
      throw new UsageError(
        `unknown command ${JSON.stringify(command)} (breakwater --help lists them)`,
      );
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    // One line, whatever went wrong: a usage mistake exits 2, anything else 1.
    const message = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    process.stderr.write(`breakwater: ${message}\n`);
    process.exitCode = error instanceof UsageError ? 2 : 1;
  },
);
