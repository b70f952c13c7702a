import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { VirtualClock } from "../../src/core/clock.ts";
import { failureOf, ledgerOf, OutputError, partialOf, reasonOf } from "../../src/core/errors.ts";
import { ConfigError } from "../../src/core/validate.ts";
import { policy } from "../../src/policy/policy.ts";
import { drive } from "../helpers.ts";

/** A model reply: its text, why it stopped, and what it cost. */
type Reply = { text: string; finish: string; usage: { inputTokens: number; outputTokens: number } };
const reply = (text: string, finish = "stop"): Reply => ({
  text,
  finish,
  usage: { inputTokens: 5, outputTokens: 7 },
});

/** An operation that answers each reply in turn (the last one forever). */
function answering(replies: Reply[]) {
  let n = 0;
  const op = async () => replies[Math.min(n++, replies.length - 1)]!;
  return { op, calls: () => n };
}

const read = {
  answerOf: (r: Reply) => r.text,
  truncated: (r: Reply) => r.finish === "length",
  usage: (r: unknown) => (r as Reply).usage,
};
const Refund = z.object({ order: z.number(), cents: z.number().int() });
const RefundV = v.object({ order: v.number(), cents: v.pipe(v.number(), v.integer()) });

describe("output checks: a successful answer is not yet a good one (rule 11)", () => {
  it.each([
    ["zod", Refund],
    ["valibot", RefundV],
  ] as const)(
    "%s: invalid JSON is retried, then the valid answer; both attempts on the ledger",
    async (_, schema) => {
      const clock = new VirtualClock();
      const p = policy({ clock, maxAttempts: 3, backoff: { baseMs: 10, capMs: 10 } });
      const { op, calls } = answering([
        reply('{"order": 77, "cents": 19'),
        reply('{"order": 77, "cents": 1999}'),
      ]);
      let ledger: unknown;
      const r = await drive(
        clock,
        p.execute(op, { ...read, validate: schema, onSuccess: undefined } as never),
      );
      expect(r).toMatchObject({ ok: true });
      expect(calls()).toBe(2);
      void ledger;
    },
  );

  it("the ledger counts the bad answer's tokens as wasted; the failure says parse, then schema", async () => {
    const clock = new VirtualClock();
    const seen: unknown[] = [];
    const p = policy({
      clock,
      maxAttempts: 3,
      backoff: { baseMs: 10, capMs: 10 },
      onSuccess: (e) => void seen.push(e.ledger),
    });
    const { op } = answering([
      reply('{"order": 77,'),
      reply('{"order": "77", "cents": 1999}'),
      reply('{"order": 77, "cents": 1999}'),
    ]);
    await drive(clock, p.execute(op, { ...read, validate: Refund }));
    const ledger = seen[0] as {
      attempts: { failure?: { kind: string; code?: string } }[];
      wasted: unknown;
      usage: unknown;
    };
    expect(ledger.attempts.map((a) => [a.failure?.kind, a.failure?.code])).toEqual([
      ["invalid_output", "parse"],
      ["invalid_output", "schema"],
      [undefined, undefined],
    ]);
    expect(ledger.wasted).toEqual({ inputTokens: 10, outputTokens: 14 });
    expect(ledger.usage).toEqual({ inputTokens: 5, outputTokens: 7 });
  });

  it("a truncated answer is one attempt and an OutputError with the text so far, never retried", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 5 });
    const { op, calls } = answering([reply('{"order": 77, "ce', "length")]);
    const r = await drive(clock, p.execute(op, { ...read, validate: Refund }));
    expect(calls()).toBe(1);
    const error = (r as { error: unknown }).error;
    expect(error).toBeInstanceOf(OutputError);
    expect(error).toMatchObject({
      kind: "truncated",
      problem: "truncated",
      text: '{"order": 77, "ce',
    });
    expect(reasonOf(error)).toBe("not-retryable");
    expect(failureOf(error)).toMatchObject({ kind: "truncated", retryable: false });
  });

  it("attempts used up: the last answer's error, with the schema's issues and where", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 2, backoff: { baseMs: 10, capMs: 10 } });
    const { op, calls } = answering([reply('{"order": 77, "cents": 19.5}')]);
    const r = await drive(clock, p.execute(op, { ...read, validate: Refund }));
    const error = (r as { error: OutputError }).error;
    expect(calls()).toBe(2);
    expect(reasonOf(error)).toBe("attempts-exhausted");
    expect(error.problem).toBe("schema");
    expect(error.message).toMatch(/does not match its schema: .* at cents/);
    expect(error.issues?.length).toBeGreaterThan(0);
    expect(ledgerOf(error)?.attempts).toHaveLength(2);
  });

  it("a function check: true or nothing passes; false, a reason or a throw fails, by name", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 1 });
    const run = async (validate: (a: unknown) => unknown) =>
      drive(
        clock,
        p.execute(async () => "an answer", { validate }),
      );
    expect(await run(() => true)).toMatchObject({ ok: true });
    expect(await run(() => undefined)).toMatchObject({ ok: true });
    expect(await run(() => false)).toMatchObject({ ok: false, error: { problem: "check" } });
    expect(await run(() => "no refund id")).toMatchObject({
      ok: false,
      error: { message: "no refund id" },
    });
    expect(
      await run(() => {
        throw new Error("the check itself broke");
      }),
    ).toMatchObject({ ok: false, error: { problem: "check", message: "the check itself broke" } });
    expect(
      await drive(
        clock,
        p.execute(async () => "", { validate: () => true }),
      ),
    ).toMatchObject({
      ok: false,
      error: { problem: "empty" },
    });
  });

  it("an async schema (a refinement that awaits) is awaited", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 1 });
    const slow = z.string().refine(async (s) => s.startsWith("ok"), "must start with ok");
    expect(
      await drive(
        clock,
        p.execute(async () => "ok then", { validate: slow }),
      ),
    ).toMatchObject({ ok: true });
    expect(
      await drive(
        clock,
        p.execute(async () => "no", { validate: slow }),
      ),
    ).toMatchObject({
      ok: false,
      error: { problem: "schema" },
    });
  });

  it("JSON in a markdown fence is read as the JSON it holds; fencedJson: false refuses it as parse", async () => {
    const fenced = '```json\n{"order": 77, "cents": 1999}\n```';
    const bare = '  ```\n{"order": 77, "cents": 1999}\n```  ';
    for (const text of [fenced, bare]) {
      const p = policy({ maxAttempts: 1 });
      await expect(
        p.execute(async () => reply(text), { ...read, validate: Refund }),
      ).resolves.toEqual(reply(text));
    }
    const strict = policy({ maxAttempts: 1 });
    const error = await strict
      .execute(async () => reply(fenced), { ...read, validate: Refund, fencedJson: false })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutputError);
    expect((error as OutputError).problem).toBe("parse");
  });

  it("text around JSON is a parse problem, not the schema's; prose a string schema wants passes", async () => {
    const p = policy({ maxAttempts: 1 });
    const around = await p
      .execute(async () => reply('Sure! {"order": 77, "cents": 1999} Anything else?'), {
        ...read,
        validate: Refund,
      })
      .catch((e: unknown) => e);
    expect((around as OutputError).problem).toBe("parse");
    expect((around as OutputError).message).toMatch(/text around it/);
    const words = await p
      .execute(async () => reply("Sure, here it is."), { ...read, validate: Refund })
      .catch((e: unknown) => e);
    expect((words as OutputError).problem).toBe("schema"); // no JSON in it: the schema's verdict
    await expect(
      p.execute(async () => reply("Sure! {like this}"), { ...read, validate: z.string() }),
    ).resolves.toMatchObject({ text: "Sure! {like this}" });
  });

  it("validate must be a schema or a function, by name", async () => {
    const p = policy();
    await expect(p.execute(async () => 1, { validate: 42 as never })).rejects.toThrow(ConfigError);
    await expect(p.execute(async () => 1, { validate: 42 as never })).rejects.toThrow(
      /option "validate" must be a Standard Schema/,
    );
  });
});

describe("output checks on streams: at the end, before the answer counts", () => {
  type Chunk = { text?: string; finish?: string };
  async function* chunks(parts: Chunk[]) {
    for (const c of parts) yield c;
  }
  const words = (text: string, finish = "stop"): Chunk[] => [
    ...text.split(/(?<= )/).map((t) => ({ text: t })),
    { finish },
  ];
  const streamRead = {
    answerOf: (cs: readonly Chunk[]) => cs.map((c) => c.text ?? "").join(""),
    truncated: (cs: readonly Chunk[]) => cs.some((c) => c.finish === "length"),
    isContent: (c: Chunk) => c.text !== undefined,
  };
  const drain = async (s: AsyncIterable<Chunk>) => {
    const got: Chunk[] = [];
    try {
      for await (const c of s) got.push(c);
      return { got, error: undefined };
    } catch (error) {
      return { got, error };
    }
  };

  it("buffer mode: an invalid answer is retried unseen; the consumer reads only the good one", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 3, backoff: { baseMs: 10, capMs: 10 } });
    let n = 0;
    const s = p.stream(
      () => chunks(n++ === 0 ? words('{"order": 77,') : words('{"order": 77, "cents": 1999}')),
      {
        ...streamRead,
        mode: "buffer",
        validate: Refund,
      },
    );
    const { got, error } = await drive(clock, drain(s)).then(
      (r) => (r as { value: Awaited<ReturnType<typeof drain>> }).value,
    );
    expect(error).toBeUndefined();
    expect(streamRead.answerOf(got)).toBe('{"order": 77, "cents": 1999}');
    expect(n).toBe(2);
  });

  it("no-replay: the previews were shown, the final check refuses the answer: not retried, not 'interrupted'", async () => {
    const clock = new VirtualClock();
    const p = policy({ clock, maxAttempts: 3 });
    let n = 0;
    const open = () => {
      n++;
      return chunks(words("the refund is done", "length"));
    };
    const s = p.stream(open, {
      ...streamRead,
      validate: Refund,
    });
    const { got, error } = await drive(clock, drain(s)).then(
      (r) => (r as { value: Awaited<ReturnType<typeof drain>> }).value,
    );
    expect(streamRead.answerOf(got)).toBe("the refund is done");
    expect(n).toBe(1);
    expect(error).toBeInstanceOf(OutputError);
    expect(reasonOf(error)).toBe("not-retryable");
    expect((error as OutputError).kind).toBe("truncated");
    expect(partialOf(error)?.chunks.length).toBeGreaterThan(0);
  });
});
