/** A binary min-heap ordered by `less`. The VirtualClock and the storm schedule
 * hundreds of thousands of timers; a sorted array would make that quadratic. */
export class MinHeap<T> {
  #items: T[] = [];
  readonly #less: (a: T, b: T) => boolean;

  constructor(less: (a: T, b: T) => boolean) {
    this.#less = less;
  }

  get size(): number {
    return this.#items.length;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    const items = this.#items;
    let i = items.push(item) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = items[parent]!;
      if (!this.#less(item, above)) break;
      items[i] = above;
      i = parent;
    }
    items[i] = item;
  }

  pop(): T | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) this.#down(0, last);
    return top;
  }

  /** Keeps only the items `keep` accepts, in heap order again, in O(n): the clock drops
   * cancelled timers this way instead of carrying them until they come due. */
  retain(keep: (item: T) => boolean): void {
    this.#items = this.#items.filter(keep);
    for (let i = (this.#items.length >> 1) - 1; i >= 0; i--) this.#down(i, this.#items[i]!);
  }

  /** Places `item` at `i` or below, moving smaller children up (a hole, not swaps). */
  #down(i: number, item: T): void {
    const items = this.#items;
    const n = items.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const m = r < n && this.#less(items[r]!, items[l]!) ? r : l;
      if (!this.#less(items[m]!, item)) break;
      items[i] = items[m]!;
      i = m;
    }
    items[i] = item;
  }
}
