#!/usr/bin/env node
import { demo } from "./demo.ts";
import { FAULT_SERVER_USAGE, faultServerCommand } from "./fault-server.ts";

const USAGE = `usage: breakwater <command> [options]

commands:
  demo           a flaky fake model driven by one policy, in virtual time
  fault-server   a fault-injecting LLM provider on loopback

${FAULT_SERVER_USAGE}
`;

const out = (s: string) => process.stdout.write(`${s}\n`);

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "demo":
      await demo(out);
      return 0;
    case "fault-server":
      return faultServerCommand(rest, out);
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
