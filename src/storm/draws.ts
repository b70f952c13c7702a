import { mulberry32 } from "../testing/index.ts";

/** A 32-bit mix of words (murmur3's finalizer over each), for seeding a stream. */
function mix(...words: number[]): number {
  let h = 0x9e3779b9;
  for (const w of words) {
    h = Math.imul(h ^ (w >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/**
 * Common random numbers: what befalls a request (an injected error, a wait at a replica, a
 * slow charge) is drawn from the request's identity and how many times it arrived, not from
 * the order requests happen to arrive in. So the n-th attempt of the same logical call meets
 * the same fate under every stack, and a stack that only shifts when its requests go (a
 * local queue, a different backoff) is compared on the same luck as the others, not on a
 * reshuffled draw (a standard variance reduction for comparing systems by simulation).
 */
export class Draws {
  readonly #salt: number;
  readonly #arrivals = new Map<number, number>();
  readonly #unkeyed: () => number;

  /** `salt`: the seed and what draws (each provider its own); `unkeyed`: the stream for a
   * request that names no identity. */
  constructor(salt: number, unkeyed: () => number) {
    this.#salt = salt >>> 0;
    this.#unkeyed = unkeyed;
  }

  /** The draws of one arrival of request `id` (its n-th arrival: the n-th stream). */
  of(id: number | undefined): () => number {
    if (id === undefined) return this.#unkeyed;
    const n = this.#arrivals.get(id) ?? 0;
    this.#arrivals.set(id, n + 1);
    return mulberry32(mix(this.#salt, id >>> 0, Math.floor(id / 2 ** 32), n));
  }
}
