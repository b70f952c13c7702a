import type { Ledger } from "../core/ledger.ts";
import { redact } from "../core/redact.ts";
import { describeError } from "../core/safe.ts";

/**
 * Runs one of the caller's hooks. Its exception never changes the call's outcome or costs
 * it anything (docs/architecture.md, rule 12): it is kept on the ledger and reported as a
 * process warning, and `fallback` stands in for the hook's answer.
 */
export function runHook<T>(owner: LedgerOwner, hook: string, fn: () => T, fallback: T): T {
  try {
    return fn();
  } catch (error) {
    reportHookError(owner, hook, error);
    return fallback;
  }
}

/** Whose ledger keeps a hook's error: read only when a hook threw (a call builds its
 * ledger lazily, and the success path must not pay for it). */
export interface LedgerOwner {
  readonly ledger: Ledger;
}

export function reportHookError(
  owner: LedgerOwner | undefined,
  hook: string,
  error: unknown,
): void {
  owner?.ledger.hookErrors.push({ hook, error });
  const text = redact(describeError(error, false));
  process.emitWarning(`breakwater: the ${hook} hook threw (the call went on without it): ${text}`, {
    type: "BreakwaterHookWarning",
    code: "BREAKWATER_HOOK_THREW",
  });
}
