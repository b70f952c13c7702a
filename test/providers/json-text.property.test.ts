import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { saysStream, withKeys } from "../../src/providers/json-text.ts";

const FLAG = /"stream"\s*:\s*true/;

describe("readings of a request's JSON text", () => {
  it("saysStream answers as the regex over the whole text does", () => {
    const piece = fc.oneof(
      fc.constantFrom(
        '"stream"',
        '"stream":true',
        '"stream" : true',
        '"stream":false',
        ":",
        " ",
        "true",
        '"',
      ),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = pieces.join("");
        expect(saysStream(text)).toBe(FLAG.test(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it("withKeys gives the JSON of the prepared body, however the text was written", () => {
    const key = fc.string({ maxLength: 6 }).filter((k) => k !== "__proto__");
    const body = fc.dictionary(key, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 });
    const added = fc.dictionary(
      key,
      fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined)),
      {
        maxKeys: 3,
      },
    );
    fc.assert(
      fc.property(body, added, fc.constantFrom(0, 2, "\t"), (parsed, extra, indent) => {
        const text = JSON.stringify(parsed, null, indent);
        const prepared = { ...parsed, ...extra };
        const out = withKeys(text, parsed, prepared);
        expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(prepared)));
      }),
      { numRuns: 2_000 },
    );
  });

  it("withKeys appends to the text as it came when it only adds keys", () => {
    const text = '{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}';
    const parsed = JSON.parse(text);
    const out = withKeys(text, parsed, { ...parsed, stream_options: { include_usage: true } });
    expect(out).toBe(`${text.slice(0, -1)},"stream_options":{"include_usage":true}}`);
    // A changed value: the body is written whole.
    expect(JSON.parse(withKeys(text, parsed, { ...parsed, model: "n" })).model).toBe("n");
  });
});
