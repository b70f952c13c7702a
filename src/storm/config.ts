import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { StormStack } from "./types.ts";

/**
 * Loads stacks from a user's module: `export default [stack, ...]` or
 * `export const stacks = [...]`, each `{ name, description?, propagatesCancel?, create }`
 * where `create({ clock, random, provider, tool })` returns `{ model, tool? }`.
 */
export async function loadStacks(file: string): Promise<StormStack[]> {
  const mod = (await import(pathToFileURL(resolve(file)).href)) as {
    default?: unknown;
    stacks?: unknown;
  };
  const list = mod.stacks ?? mod.default;
  if (!Array.isArray(list) || list.length === 0) {
    throw new TypeError(
      `${file}: export a non-empty array of stacks as "stacks" or as the default export`,
    );
  }
  return list.map((s, i) => {
    const at = `${file}: stacks[${i}]`;
    if (s === null || typeof s !== "object")
      throw new TypeError(`${at} must be an object; got ${String(s)}`);
    const { name, description, propagatesCancel, create } = s as Partial<StormStack>;
    if (typeof name !== "string" || name === "")
      throw new TypeError(`${at}.name must be a non-empty string`);
    if (typeof create !== "function")
      throw new TypeError(
        `${at}.create must be a function ({ clock, random, provider, tool }) => { model, tool? }`,
      );
    if (propagatesCancel !== undefined && typeof propagatesCancel !== "boolean")
      throw new TypeError(`${at}.propagatesCancel must be true or false`);
    return {
      name,
      description: typeof description === "string" ? description : name,
      propagatesCancel: propagatesCancel ?? true,
      create,
    };
  });
}
