/**
 * The mark an adapter leaves on what it wraps (a client, a chat model), so `audit` reading
 * the live object sees breakwater's layer there, not the SDK's retries it turned off.
 */
export const LAYER = Symbol.for("breakwater.layer");

/** What the mark says: who wrapped it and how many attempts its policy makes. */
export interface LayerMark {
  readonly owner: string;
  readonly attempts: number;
}

/** `x`, marked (a symbol key: invisible to JSON, to the SDK and to `Object.keys`). */
export function markLayer<T extends object>(x: T, mark: LayerMark): T {
  Object.defineProperty(x, LAYER, { value: mark, configurable: true });
  return x;
}

/** The mark on `x`, when an adapter wrapped it. */
export function layerMark(x: unknown): LayerMark | undefined {
  if (x === null || (typeof x !== "object" && typeof x !== "function")) return undefined;
  try {
    const m = (x as { [LAYER]?: LayerMark })[LAYER];
    return m !== undefined && typeof m.attempts === "number" ? m : undefined;
  } catch {
    return undefined; // a hostile getter: no mark
  }
}
