import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Usage } from "../../src/core/usage.ts";
import { policy } from "../../src/policy/policy.ts";
import { type Dialect, guardedFetch } from "../../src/providers/fetch.ts";
import { bytewise, joinable, marksOf, tailOf } from "../../src/providers/sse-runs.ts";

const NUM_RUNS = Number(process.env.SSE_RUNS ?? 1_000);
const enc = new TextEncoder();
const latin1 = (b: Uint8Array) => Buffer.from(b).toString("latin1");

describe("bytewise: which marks find in a read's bytes, one character each, what they find in its text", () => {
  it("printable ASCII whose escapes stand for ASCII, taking no single character of any kind", () => {
    const yes = [
      /"usage"\s*:\s*\{/,
      /error|response\.failed/,
      /usageMetadata/,
      /a\.b/,
      /\\\./,
      /[a-z]+/,
    ];
    const no = [
      /a.b/,
      /a\\.b/,
      /[^x]/,
      /\S+/,
      /\W/,
      /\d\D/,
      /é/,
      /x/u,
      // biome-ignore lint/complexity/useRegexLiterals: a literal with the v flag, or an octal escape, does not compile for the target
      new RegExp("x", "v"),
      /"\u670d\u52a1"/, // written in ASCII, stands for CJK
      /\xe9/,
      // biome-ignore lint/complexity/useRegexLiterals: as above
      new RegExp("\\351"),
      /(a)\1/,
      /[\u4e00-\u9fff]/,
      /^error/m, // U+2028 ends a line of text, not of bytes
      /error$/m,
    ];
    expect(yes.map(bytewise)).toEqual(yes.map(() => true));
    expect(no.map(bytewise)).toEqual(no.map(() => false));
  });

  it("property: a bytewise mark that matches a text matches its bytes read one character each, but for whitespace that is not ASCII (JSON has none)", () => {
    const marks = [
      /"usage"\s*:\s*\{/,
      /error|response\.failed/,
      /"usageMetadata"/,
      /"type"\s*:\s*"error"/,
    ];
    const piece = fc.oneof(
      fc.string({ unit: "grapheme" }),
      fc.constantFrom('"usage"', ": ", ":{", "{", "error", '"type":"error"', "é", "日本", "🙂"),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 20 }), (pieces) => {
        const text = pieces.join("").replace(/(?![\t\n\v\f\r ])\s/g, "");
        for (const m of marks)
          if (bytewise(m) && m.test(text)) expect(m.test(latin1(enc.encode(text)))).toBe(true);
      }),
      { numRuns: NUM_RUNS },
    );
    // The exception, which no JSON between its tokens has: a non-breaking space is \s as text.
    const nbsp = '"usage"\u00a0:{';
    expect([marks[0]!.test(nbsp), marks[0]!.test(latin1(enc.encode(nbsp)))]).toEqual([true, false]);
  });
});

describe("joinable: which marks find in several events at once what they find in each", () => {
  it("no $, no \\B, no ^ without the m flag, looking around nothing; a class or an escape is no anchor", () => {
    const yes = [
      /"usage"\s*:\s*\{/,
      /^event: error/m,
      /[$^]error/,
      /\^error\$/,
      /(?:error)/,
      /(error)/,
      /\berror\b/,
      /[B]/,
    ];
    const no = [
      /^event: error/,
      /error$/,
      /error$/m,
      /error\n\n\B/,
      /(?<=x)error/,
      /(?<!x)error/,
      /error(?=x)/,
      /error(?!x)/,
    ];
    expect(yes.map(joinable)).toEqual(yes.map(() => true));
    expect(no.map(joinable)).toEqual(no.map(() => false));
  });

  it("tailOf: no runs for a dialect that reads usage or errors with no mark, or with one not joinable", () => {
    const base: Dialect = {
      isContent: () => true,
      usage: () => undefined,
      inBand: () => undefined,
    };
    const tail = (marks: Dialect["marks"]) =>
      tailOf({ ...base, marks }, marksOf({ ...base, marks }));
    expect(tail(undefined)).toBeUndefined();
    // A usage mark with groups is not joined to the error mark: `\1` would point at its group.
    expect(tail({ usage: /"(usage)"/, error: /(["'])type\1/ })?.marks.map(String)).toEqual([
      '/"(usage)"/',
      "/([\"'])type\\1/",
    ]);
    expect(tail({ usage: /usage/ })).toBeUndefined(); // errors would go unread
    expect(tail({ usage: /usage/, error: /^event: error/ })).toBeUndefined();
    expect(tail({ usage: /usage/g, error: /error/y })?.marks.map(String)).toEqual([
      "/usage|error/",
    ]);
    expect(tail({ usage: /usage/, error: /"\u670d"/ })?.bytewise).toBe(false);
    expect(tailOf({ isContent: () => true }, marksOf({ isContent: () => true }))?.marks).toEqual(
      [],
    );
  });
});

/** How one stream through the fetch layer ended, for breakwater: success with its usage and
 * the model that answered, or a give-up; the bytes the SDK read are checked to be `sent`
 * (the server's, unless an error event ended them). */
async function outcome(dialect: Dialect, reads: string[], sent = reads.join("")) {
  const ends: { how: string; usage?: Usage; model?: string | undefined }[] = [];
  const fetch = guardedFetch({
    fetch: async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(c) {
            for (const r of reads) c.enqueue(enc.encode(r));
            c.close();
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      ),
    dialect,
    policy: policy({
      maxAttempts: 1,
      onSuccess: (e) =>
        void ends.push({
          how: "success",
          usage: e.ledger.usage,
          model: e.ledger.attempts[0]?.responseModel,
        }),
      onGiveUp: (e) => void ends.push({ how: `gave up: ${e.reason}` }),
    }),
  });
  const res = await fetch("http://x.local/v1/chat/completions", {
    method: "POST",
    body: JSON.stringify({ model: "m", stream: true }),
  });
  expect(await res.text()).toBe(sent);
  return ends;
}

describe("the fetch layer's marks, whether events come one a read or several", () => {
  const isText = (json: unknown) =>
    typeof (json as { text?: unknown } | undefined)?.text === "string";
  const first = 'event: delta\ndata: {"text":"Hel"}\n\n';
  const more = 'event: delta\ndata: {"text":"lo"}\n\n';
  const gaveUp = [{ how: expect.stringMatching(/^gave up/) }];
  const reader = (json: unknown) => {
    const u = (json as { usage?: { in: number; out: number } } | undefined)?.usage;
    return u && { inputTokens: u.in, outputTokens: u.out };
  };

  it("an anchored error mark still finds the error event that follows content in the same read", async () => {
    const dialect: Dialect = {
      isContent: isText,
      inBand: (_json, e) => (e.event === "error" ? { error: e.data } : undefined),
      marks: { error: /^event: error/ },
    };
    const error = 'event: error\ndata: {"type":"overloaded_error"}\n\n';
    expect(await outcome(dialect, [first, more, error])).toEqual(gaveUp);
    expect(await outcome(dialect, [first, more + error])).toEqual(gaveUp);
  });

  it("an anchored usage mark still reads the usage that follows content in the same read", async () => {
    const dialect: Dialect = {
      isContent: isText,
      usage: reader,
      marks: { usage: /^data: \{"usage"/ },
    };
    const usage = 'data: {"usage":{"in":5,"out":7}}\n\n';
    const want = [{ how: "success", usage: { inputTokens: 5, outputTokens: 7 }, model: undefined }];
    expect(await outcome(dialect, [first, more, usage])).toMatchObject(want);
    expect(await outcome(dialect, [first, more + usage])).toMatchObject(want);
  });

  it("an error mark written in ASCII escapes for text that is not ASCII finds the error", async () => {
    // "服务器繁忙" (server busy), in an ASCII-only source.
    const dialect: Dialect = {
      isContent: isText,
      inBand: (json) => ((json as { error?: unknown } | undefined)?.error ? json : undefined),
      marks: { error: /"\u670d\u52a1\u5668\u7e41\u5fd9"/ },
    };
    const error = 'data: {"error":"服务器繁忙"}\n\n';
    expect(await outcome(dialect, [first, more, error])).toEqual(gaveUp);
    expect(await outcome(dialect, [first, more + error])).toEqual(gaveUp);
  });

  // No responseModel: the answering model is looked for in the first four events, and no
  // run comes before the look is done.
  const pre = Array(4).fill(first);
  const typed = (json: unknown) =>
    (json as { type?: string } | undefined)?.type === "error" ? { error: json } : undefined;
  const overloaded = 'data: {"type":"error","message":"overloaded"}\n\n';

  it("a usage mark with groups: the error mark's back reference still finds the error", async () => {
    const dialect: Dialect = {
      isContent: isText,
      inBand: typed,
      usage: () => undefined,
      marks: { usage: /"(usage)"/, error: /(["'])type\1:\1(error)\1/ },
    };
    expect(await outcome(dialect, [...pre, overloaded])).toEqual(gaveUp);
  });

  it("a mark that holds at an event's end alone ($ with m, \\B) still finds it before another event", async () => {
    for (const error of [/"overloaded"\}\n\n$/m, /"overloaded"\}\n\n\B/]) {
      const dialect: Dialect = { isContent: isText, inBand: typed, marks: { error } };
      // The SDK reads up to the error event, the last it is handed.
      const reads = [...pre, `${overloaded}data: [DONE]\n\n`];
      expect(await outcome(dialect, reads, [...pre, overloaded].join(""))).toEqual(gaveUp);
    }
  });

  it("^ with m after U+2028 (a line end in text, not in bytes) still finds the error", async () => {
    const dialect: Dialect = {
      isContent: isText,
      marks: { error: /^overloaded/m },
      inBand: (json) =>
        (json as { text?: string } | undefined)?.text?.includes("overloaded")
          ? { error: json }
          : undefined,
    };
    expect(await outcome(dialect, [...pre, 'data: {"text":"\u2028overloaded"}\n\n'])).toEqual(
      gaveUp,
    );
  });

  it("a global or sticky mark reads each event afresh: the last usage counts", async () => {
    const dialect: Dialect = { isContent: isText, usage: reader, marks: { usage: /"usage"/g } };
    const reads = [
      `data: {"text":"Hello","pad":"${"x".repeat(40)}","usage":{"in":1,"out":1}}\n\n`,
      'data: {"usage":{"in":3,"out":9}}\n\n',
    ];
    expect(await outcome(dialect, reads)).toMatchObject([
      { how: "success", usage: { inputTokens: 3, outputTokens: 9 } },
    ]);
  });

  it("the answering model named only in the second event is recorded, though no mark is needed", async () => {
    const dialect: Dialect = {
      isContent: isText,
      responseModel: (json) => (json as { model?: string } | undefined)?.model,
    };
    const reads = ['data: {"text":"Hel"}\n\n', 'data: {"text":"lo","model":"m-2025"}\n\n'];
    expect(await outcome(dialect, reads)).toMatchObject([{ how: "success", model: "m-2025" }]);
  });
});
