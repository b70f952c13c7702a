import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { classify } from "../../src/index.ts";
import { type Case, clientsFor, expected, withServer } from "./corpus/replay.ts";

const DIR = join(import.meta.dirname, "corpus");
const CASES: Case[] = ["openai-compatible.json", "anthropic-gemini-bedrock.json"].flatMap(
  (f) => JSON.parse(readFileSync(join(DIR, f), "utf8")) as Case[],
);

const rows = CASES.flatMap((c) =>
  clientsFor(c).map(([name, client]) => [c.id, name, c, client] as const),
);

describe("real error responses, replayed through the SDKs users use, classify as they should", () => {
  it.each(rows)("%s via %s", async (_id, name, c, client) => {
    const error = await withServer(c, (url) => client(url, c));
    expect(error, "the SDK raised no error").toBeDefined();
    const f = classify(error);
    const got = { kind: f.kind, retryable: f.retryable };
    const want = expected(c, name);
    expect(got, `${c.note}\nprovenance: ${c.provenance}`).toEqual({
      kind: want.kind,
      retryable: want.retryable,
    });
    // The wait hint, where the server gave one and this client kept it; none where it gave
    // none (a hint read where there is none would make a call wait for nothing).
    if (c.expectVia?.[name]) return;
    if (c.expect.retryAfterMs === null) expect(f.retryAfterMs, "no hint").toBeUndefined();
    else
      expect(Math.abs((f.retryAfterMs ?? Number.NaN) - c.expect.retryAfterMs)).toBeLessThanOrEqual(
        1_000,
      );
  });
});
