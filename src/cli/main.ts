#!/usr/bin/env node
import { demo } from "./demo.ts";

const USAGE = `usage: breakwater <command>

commands:
  demo           a flaky fake model driven by one policy, in virtual time
`;

async function main(argv: string[]): Promise<number> {
  const [command] = argv;
  switch (command) {
    case "demo":
      await demo();
      return 0;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return command === undefined ? 1 : 0;
    default:
      process.stderr.write(`breakwater: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
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
