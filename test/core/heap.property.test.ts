import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MinHeap } from "../../src/core/heap.ts";

type Op = { push: number } | { pop: true } | { retainEven: true };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: -50, max: 50 }).map((push) => ({ push })) },
  { weight: 3, arbitrary: fc.constant({ pop: true as const }) },
  { weight: 1, arbitrary: fc.constant({ retainEven: true as const }) },
);

describe("MinHeap", () => {
  it("pops in order whatever the pushes, pops and retains before, as a sorted list would", () =>
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const heap = new MinHeap<number>((a, b) => a < b);
        let model: number[] = [];
        for (const o of ops) {
          if ("push" in o) {
            heap.push(o.push);
            model.push(o.push);
            model.sort((a, b) => a - b);
          } else if ("pop" in o) expect(heap.pop()).toBe(model.shift());
          else {
            heap.retain((x) => x % 2 === 0);
            model = model.filter((x) => x % 2 === 0);
          }
          expect(heap.size).toBe(model.length);
          expect(heap.peek()).toBe(model[0]);
        }
        while (model.length > 0) expect(heap.pop()).toBe(model.shift());
        expect(heap.pop()).toBeUndefined();
      }),
    ));
});
