import { access, constants, readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { type ParseArgsConfig, parseArgs } from "node:util";

/** A mistake on the command line: one line for the user, exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/**
 * Parses a command's options strictly, with one-line errors: an unknown option, a missing
 * value, a negative number written with a space (`--seed -1`: write `--seed=-1`).
 */
export function parse<O extends NonNullable<ParseArgsConfig["options"]>>(
  command: string,
  argv: string[],
  options: O,
) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    const first = (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
    const negative = /'(--[\w-]+)(?: <value>)?' argument is ambiguous/.exec(first);
    throw new UsageError(
      negative
        ? `${command}: ${negative[1]} takes a value; for a negative one write ${negative[1]}=-N`
        : `${command}: ${first.replace(/\.\s*To specify a positional argument.*$/, "")}`,
    );
  }
}

/** An integer option in [min, max], named in the error with what was given. */
export function integer(
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return fallback;
  const n = /^-?\d+$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new UsageError(
      `--${name} must be an integer from ${min} to ${max}; got ${JSON.stringify(raw)}`,
    );
  return n;
}

/** Reads a file named by an option; a missing or unreadable one is named, not a stack. */
export async function readNamed(option: string, path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new UsageError(
      `--${option} ${path}: ${code === "ENOENT" ? "no such file" : (error as Error).message}`,
    );
  }
}

/** Fails now, not after the long work, when an output file cannot be written. */
export async function writable(option: string, path: string | undefined): Promise<void> {
  if (path === undefined) return;
  const dir = dirname(resolve(path));
  try {
    await access(dir, constants.W_OK);
  } catch {
    throw new UsageError(
      `--${option} ${path}: cannot write there (no such directory, or not writable: ${dir})`,
    );
  }
}

/** `argv` split at `--`: the command's own arguments, and the command it runs once ready. */
export function splitCommand(name: string, argv: string[]): { own: string[]; command: string[] } {
  const dash = argv.indexOf("--");
  if (dash === -1) return { own: argv, command: [] };
  const command = argv.slice(dash + 1);
  if (command.length === 0)
    throw new UsageError(`${name}: -- names no command (write -- node file.mjs)`);
  return { own: argv.slice(0, dash), command };
}
