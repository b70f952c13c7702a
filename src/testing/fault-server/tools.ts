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

/** Keys and effects kept at most (the oldest are forgotten first): a long run or a flood of
 * large bodies must not grow the server without bound. */
const MAX_ENTRIES = 50_000;
/** Arguments echoed back in a result at most; larger ones are echoed as their digest. */
const MAX_ECHO = 4_096;

function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_ENTRIES) map.delete(map.keys().next().value as K);
}

/**
 * The dependency behind the tool endpoint: performs recorded side effects and honours
 * Idempotency-Key the way payment APIs do. It keeps digests, not bodies.
 */
export class SideEffectLedger {
  readonly #keys = new Map<string, KeyRecord>();
  readonly #effects = new Map<string, true>();
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
      remember(this.#keys, `${tool}\u0000${key}`, {
        hash: sha256(canonicalJson(body)),
        result: undefined,
        running: true,
      });
  }

  /** Performs the side effect; returns its result. */
  execute(key: string | undefined, tool: string, body: unknown): unknown {
    const json = canonicalJson(body);
    const hash = sha256(json);
    const effect = `${tool}\u0000${hash}`;
    if (this.#effects.has(effect)) this.stats.duplicateEffects++;
    remember(this.#effects, effect, true);
    this.stats.executed++;
    const args = json.length <= MAX_ECHO ? body : { sha256: hash };
    const result = { status: "ok", tool, executionId: this.stats.executed, args };
    if (key !== undefined)
      remember(this.#keys, `${tool}\u0000${key}`, { hash, result, running: false });
    return result;
  }
}
