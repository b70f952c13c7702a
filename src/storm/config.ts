import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigError } from "../index.ts";
import { opt, parseOptions, type Rule } from "../internal.ts";
import type { StormStack } from "./types.ts";

const STACK = {
  name: opt.str(),
  description: opt.str(),
  propagatesCancel: opt.bool(true),
  fallback: opt.bool(false),
  engine: opt.bool(false),
  create: opt.fn<StormStack["create"]>(),
};

/** One stack, checked: `{ name, description?, propagatesCancel?, fallback?, engine?, create }`. */
export const stackRule: Rule<StormStack> = (v, at, x) => {
  const s = parseOptions(v, STACK, x, at);
  const name = s.name ?? v.fail(`${at}.name`, undefined, "a non-empty string");
  const create =
    s.create ??
    v.fail(
      `${at}.create`,
      undefined,
      "a function ({ clock, random, provider, tool }) => { model, tool? }",
    );
  return {
    name,
    description: s.description ?? name,
    propagatesCancel: s.propagatesCancel,
    fallback: s.fallback,
    ...(s.engine && { engine: true }),
    create,
  };
};

/**
 * Loads stacks from a user's module: `export default [stack, ...]` or
 * `export const stacks = [...]`, each `{ name, description?, propagatesCancel?, fallback?,
 * create }` where `create({ clock, random, provider, tool, fallback })` returns
 * `{ model, tool? }`.
 */
export async function loadStacks(file: string): Promise<StormStack[]> {
  const mod = (await import(pathToFileURL(resolve(file)).href)) as {
    default?: unknown;
    stacks?: unknown;
  };
  const list = mod.stacks ?? mod.default;
  if (!Array.isArray(list) || list.length === 0)
    throw new ConfigError(
      file,
      "stacks",
      list,
      'a non-empty array of stacks, exported as "stacks" or as the default export',
    );
  return parseOptions(file, { stacks: opt.list(stackRule) }, { stacks: list }).stacks!;
}
