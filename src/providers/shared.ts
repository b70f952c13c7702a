import type { PolicyOptions } from "../policy/options.ts";
import { type Policy, policy } from "../policy/policy.ts";

/** A built policy, or one built from options (the adapter's default when none is given). */
export function asPolicy(p: Policy | PolicyOptions | undefined): Policy {
  if (
    p !== undefined &&
    typeof (p as Policy).execute === "function" &&
    typeof (p as Policy).stream === "function"
  )
    return p as Policy;
  return policy((p as PolicyOptions | undefined) ?? {});
}

/** A view of `target` in which a few paths are replaced; everything else passes through. */
export function overlay<T extends object>(
  target: T,
  overrides: Record<string | symbol, unknown>,
): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      if (Object.hasOwn(overrides, prop)) return overrides[prop];
      const v = Reflect.get(t, prop, receiver);
      return typeof v === "function" ? v.bind(t) : v;
    },
  });
}
