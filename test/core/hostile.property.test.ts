import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FAILURE_KINDS } from "../../src/core/failure.ts";
import { classify, parseRetryAfter } from "../../src/index.ts";
import { readHeader } from "../../src/internal.ts";

/** Every field classify reads, at any depth. */
const FIELDS = [
  "cause",
  "name",
  "status",
  "statusCode",
  "code",
  "errno",
  "type",
  "message",
  "error",
  "data",
  "response",
  "headers",
  "responseHeaders",
  "details",
  "retryDelay",
  "@type",
  "get",
] as const;

const boom = () => {
  throw new Error("hostile getter");
};

/** Values nothing should choke on: odd primitives, throwing objects, proxies. Built in a
 * map step: fast-check itself must not touch them. */
const MAKERS: (() => unknown)[] = [
  () => true,
  () => 12n,
  () => Symbol("s"),
  () => Number.NaN,
  () => Number.POSITIVE_INFINITY,
  () => "",
  () => "503",
  () => "retry-after",
  () => "Wed, 21 Oct 2015 07:28:00 GMT",
  () => "30s",
  () => 429,
  () => null,
  () => undefined,
  () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    return proxy;
  },
  () => new Proxy({}, { get: boom, has: boom, ownKeys: boom, getPrototypeOf: boom }),
  () => ({ toString: boom, valueOf: boom, [Symbol.toPrimitive]: boom }),
  () =>
    new Map<unknown, unknown>([
      [Symbol("k"), 1],
      ["retry-after", 12n],
    ]),
  () => ({ get: boom }),
  () => [new Proxy([], { get: boom })],
];
const hostileLeaf = fc.nat(MAKERS.length - 1).map((i) => ({ make: MAKERS[i]! }));

/** An error-shaped object whose chosen fields are hostile values or throwing getters. */
const hostile = fc.letrec((tie) => ({
  node: fc
    .tuple(
      fc.dictionary(fc.constantFrom(...FIELDS), fc.oneof(hostileLeaf, tie("node")), { maxKeys: 6 }),
      fc.subarray([...FIELDS], { maxLength: 3 }),
      fc.boolean(),
      fc.boolean(),
    )
    .map(([fields, throwing, cyclic, asError]) => ({
      make: () => {
        const o = (asError ? new Error("x") : {}) as Record<string, unknown>;
        for (const [k, v] of Object.entries(fields)) o[k] = (v as { make: () => unknown }).make();
        for (const k of throwing) Object.defineProperty(o, k, { get: boom, enumerable: true });
        if (cyclic && !throwing.includes("cause")) o.cause = o;
        return o;
      },
    })),
})).node as fc.Arbitrary<{ make: () => unknown }>;

/** Hostile values (made fresh per run), and anything fast-check can think of. */
const anything: fc.Arbitrary<{ make: () => unknown }> = fc.oneof(
  hostile,
  hostileLeaf,
  fc.anything().map((v) => ({ make: () => v })),
);

describe("classify and parseRetryAfter are total (docs/architecture.md, rule 3)", () => {
  it("classify returns a well-formed Failure for anything, hostile objects included", () => {
    fc.assert(
      fc.property(anything, fc.oneof(fc.integer(), fc.constant(Number.NaN)), (error, now) => {
        const f = classify(error.make(), now);
        expect(FAILURE_KINDS).toContain(f.kind);
        expect(typeof f.retryable).toBe("boolean");
        if (f.retryAfterMs !== undefined) {
          expect(Number.isFinite(f.retryAfterMs)).toBe(true);
          expect(f.retryAfterMs).toBeGreaterThanOrEqual(0);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it("parseRetryAfter and readHeader never throw and never answer NaN or a negative", () => {
    fc.assert(
      fc.property(anything, fc.oneof(fc.integer(), fc.constant(Number.NaN)), (made, now) => {
        const value = made.make();
        const ms = parseRetryAfter(value as never, now);
        if (ms !== undefined) {
          expect(Number.isFinite(ms)).toBe(true);
          expect(ms).toBeGreaterThanOrEqual(0);
        }
        const h = readHeader(value, "retry-after");
        expect(h === undefined || typeof h === "string").toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });

  it("the shapes reported as throwing before: each classifies", () => {
    const getter = (key: string) => Object.defineProperty(new Error("x"), key, { get: boom });
    const shapes: unknown[] = [
      ...["cause", "name", "status", "code", "error", "response"].map(getter),
      new Proxy(new Error("x"), { get: boom }),
      (() => {
        const { proxy, revoke } = Proxy.revocable(new Error("x"), {});
        revoke();
        return proxy;
      })(),
      Object.assign(new Error("x"), { status: 429, headers: true }),
      Object.assign(new Error("x"), { status: 503n, code: Symbol("c") }),
      Object.assign(new Error("x"), { status: 429, headers: { "retry-after": 10n } }),
    ];
    for (const s of shapes) expect(FAILURE_KINDS).toContain(classify(s).kind);
    for (const v of [true, 12n, Symbol(), { toString: boom }])
      expect(parseRetryAfter(v as never)).toBeUndefined();
  });
});
