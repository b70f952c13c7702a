#!/usr/bin/env node
import { AUDIT_USAGE, auditCommand } from "./audit.ts";
import { demo } from "./demo.ts";
import { FAULT_SERVER_USAGE, faultServerCommand } from "./fault-server.ts";
import { STORM_USAGE, stormCommand } from "./storm.ts";

const USAGE = `usage: breakwater <command> [options]

commands:
  storm          simulate an outage and compare retry stacks (the main job)
  fault-server   a fault-injecting LLM provider on loopback
  audit          multiply the retry layers around a call; flag hidden SDK retries
  demo           a flaky fake model driven by one policy, in virtual time

${STORM_USAGE}

${FAULT_SERVER_USAGE}

${AUDIT_USAGE}
`;

const out = (s: string) => process.stdout.write(`${s}\n`);

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "storm":
      return stormCommand(rest, out);
    case "fault-server":
      return faultServerCommand(rest, out);
    case "audit":
      return auditCommand(rest, out);
    case "demo":
      await demo(out);
      return 0;
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return 0;
    default:
      process.stderr.write(
        `${command === undefined ? "" : `breakwater: unknown command ${JSON.stringify(command)}\n\n`}${USAGE}`,
      );
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    process.stderr.write(`breakwater: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
