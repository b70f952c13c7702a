import { createHash } from "node:crypto";
import { canonicalJson } from "../../index.ts";
import type { ToolStats } from "./stats.ts";

const sha256 = (s: string): string => createHash("sha256").update(s).digest("hex");

interface KeyRecord {
  hash: string;
  result: unknown;
  running: boolean;
}

export type IdempotencyVerdict =
  | { kind: "execute" }
  | { kind: "replay"; result: unknown }
  | { kind: "conflict" }
  | { kind: "mismatch" };

/**
 * The dependency behind the tool endpoint: performs recorded side effects and honours
 * Idempotency-Key the way payment APIs do.
 */
export class SideEffectLedger {
  readonly #keys = new Map<string, KeyRecord>();
  readonly #effects = new Set<string>();
  readonly stats: ToolStats;

  constructor(stats: ToolStats) {
    this.stats = stats;
  }

  /** What a request with this key and body gets. */
  check(key: string | undefined, tool: string, body: unknown): IdempotencyVerdict {
    if (key === undefined) return { kind: "execute" };
    const rec = this.#keys.get(`${tool}\u0000${key}`);
    if (rec === undefined) return { kind: "execute" };
    if (rec.hash !== sha256(canonicalJson(body))) {
      this.stats.mismatches++;
      return { kind: "mismatch" };
    }
    if (rec.running) {
      this.stats.conflicts++;
      return { kind: "conflict" };
    }
    this.stats.duplicatesPrevented++;
    return { kind: "replay", result: rec.result };
  }

  /** Marks the work as started under `key` (a repeat meanwhile gets a 409). */
  begin(key: string | undefined, tool: string, body: unknown): void {
    if (key !== undefined)
      this.#keys.set(`${tool}\u0000${key}`, {
        hash: sha256(canonicalJson(body)),
        result: undefined,
        running: true,
      });
  }

  /** Performs the side effect; returns its result. */
  execute(key: string | undefined, tool: string, body: unknown): unknown {
    const effect = `${tool}\u0000${canonicalJson(body)}`;
    if (this.#effects.has(effect)) this.stats.duplicateEffects++;
    this.#effects.add(effect);
    this.stats.executed++;
    const result = { status: "ok", tool, executionId: this.stats.executed, args: body };
    if (key !== undefined)
      this.#keys.set(`${tool}\u0000${key}`, {
        hash: sha256(canonicalJson(body)),
        result,
        running: false,
      });
    return result;
  }
}
