import { redact } from "../core/redact.ts";
import type { PolicyOptions } from "../policy/options.ts";
import { type Policy, policy } from "../policy/policy.ts";
import type { GuardedStream } from "../policy/stream.ts";

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

/** Masks secrets in an error's message and in its causes' (DESIGN rule 10). */
export function scrub(error: unknown): unknown {
  const seen = new Set<unknown>();
  for (
    let e = error;
    e !== null && typeof e === "object" && !seen.has(e) && seen.size < 8;
    e = (e as { cause?: unknown }).cause
  ) {
    seen.add(e);
    const m = (e as { message?: unknown }).message;
    if (typeof m === "string") {
      const clean = redact(m);
      if (clean !== m) {
        try {
          (e as { message: string }).message = clean;
        } catch {}
      }
    }
  }
  return error;
}

/** Rethrows with secrets masked. */
export const rethrowScrubbed = (error: unknown): never => {
  throw scrub(error);
};

/** Scrubs whatever the stream's iterator throws. */
export function scrubStream<C>(s: GuardedStream<C>): GuardedStream<C> {
  const next = s.next.bind(s);
  Object.defineProperty(s, "next", {
    value: () => next().catch(rethrowScrubbed),
    configurable: true,
  });
  return s;
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
