/**
 * The compatibility matrix: each adapter against the oldest major its peer range claims and
 * the latest npm serves (the oldest are installed as npm aliases: `openai-v6`,
 * `anthropic-v0`, `genai-v2`). The same scenarios on every version, with the real client
 * against the fault server: the peer ranges in package.json say only what passes here.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import { withBreakwater as anthropicWith } from "../../src/providers/anthropic.ts";
import { withBreakwater as googleWith } from "../../src/providers/google.ts";
import { withBreakwater as openaiWith } from "../../src/providers/openai.ts";
import { MemoryJournal } from "../../src/run/journal.ts";
import { Run } from "../../src/run/run.ts";
import { TEXT, useFaultServer } from "../providers/fixture.ts";

const fs = useFaultServer();
const fast = () => policy({ maxAttempts: 3, backoff: { baseMs: 5, capMs: 10 } });
const version = (pkg: string): string =>
  JSON.parse(
    readFileSync(new URL(`../../node_modules/${pkg}/package.json`, import.meta.url), "utf8"),
  ).version;

/** One SDK at one version, driven the way its users call it. */
interface Sdk {
  /** A wrapped client: policy, and optionally a run. */
  make(run?: Run): Promise<unknown>;
  /** One JSON call's text. */
  json(c: unknown, perRequestRetries?: number): Promise<string>;
  /** One streamed call's text, as the consumer read it. */
  stream(c: unknown): Promise<string>;
  /** The error class the SDK raises for an answer that is not 2xx. */
  apiError(): Promise<new (...a: never[]) => unknown>;
}

type Any = Record<string, any>;

const openai = (pkg: string): Sdk => ({
  async make(run) {
    const { default: OpenAI } = await import(pkg);
    return openaiWith(new OpenAI({ baseURL: `${fs.server.url}/v1`, apiKey: "sk-test" }), {
      policy: fast(),
      ...(run && { run }),
    });
  },
  async json(c, maxRetries) {
    const r = await (c as Any).chat.completions.create(
      { model: "m", messages: [{ role: "user", content: "hi" }] },
      maxRetries === undefined ? undefined : { maxRetries },
    );
    return r.choices[0].message.content;
  },
  async stream(c) {
    let text = "";
    const s = await (c as Any).chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? "";
    return text;
  },
  apiError: async () => (await import(pkg)).default.APIError,
});

const anthropic = (pkg: string): Sdk => ({
  async make(run) {
    const { default: Anthropic } = await import(pkg);
    return anthropicWith(new Anthropic({ baseURL: fs.server.url, apiKey: "k" }), {
      policy: fast(),
      ...(run && { run }),
    });
  },
  async json(c, maxRetries) {
    const m = await (c as Any).messages.create(
      { model: "m", max_tokens: 64, messages: [{ role: "user", content: "hi" }] },
      maxRetries === undefined ? undefined : { maxRetries },
    );
    return m.content.map((b: Any) => b.text ?? "").join("");
  },
  async stream(c) {
    let text = "";
    const s = await (c as Any).messages.create({
      model: "m",
      max_tokens: 64,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    for await (const e of s) if (e.type === "content_block_delta") text += e.delta.text ?? "";
    return text;
  },
  apiError: async () => (await import(pkg)).default.APIError,
});

const google = (pkg: string): Sdk => ({
  async make(run) {
    const { GoogleGenAI } = await import(pkg);
    return googleWith(new GoogleGenAI({ apiKey: "k", httpOptions: { baseUrl: fs.server.url } }), {
      policy: fast(),
      ...(run && { run }),
    });
  },
  async json(c, attempts) {
    const r = await (c as Any).models.generateContent({
      model: "gemini-x",
      contents: "hi",
      ...(attempts !== undefined && {
        config: { httpOptions: { retryOptions: { attempts: attempts + 1 } } },
      }),
    });
    return r.text;
  },
  async stream(c) {
    let text = "";
    const s = await (c as Any).models.generateContentStream({ model: "gemini-x", contents: "hi" });
    for await (const chunk of s) text += chunk.text ?? "";
    return text;
  },
  apiError: async () => (await import(pkg)).ApiError,
});

const MATRIX: [string, string, Sdk][] = [
  ["openai", "openai", openai("openai")],
  ["openai", "openai-v6", openai("openai-v6")],
  ["@anthropic-ai/sdk", "@anthropic-ai/sdk", anthropic("@anthropic-ai/sdk")],
  ["@anthropic-ai/sdk", "anthropic-v0", anthropic("anthropic-v0")],
  ["@google/genai", "@google/genai", google("@google/genai")],
  ["@google/genai", "genai-v2", google("genai-v2")],
];

describe.each(MATRIX)("%s as installed from %s", (_, pkg, sdk) => {
  it(`is the version installed: ${version(pkg)}`, () => {
    expect(version(pkg)).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("503 twice, then an answer: three requests", async () => {
    fs.script({ rules: [{ status: 503, times: 2 }] });
    expect(await sdk.json(await sdk.make())).toBe(TEXT);
    expect(fs.requests()).toBe(3);
  });

  it("an endless 503: maxAttempts requests, the SDK's own error, breakwater's reason on it", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const e = await sdk.json(await sdk.make()).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(await sdk.apiError());
    expect(fs.requests()).toBe(3);
    expect(reasonOf(e)).toBe("attempts-exhausted");
    expect(ledgerOf(e)?.attempts).toHaveLength(3);
  });

  it("the request's own retries asked for: still maxAttempts requests", async () => {
    fs.script({ rules: [{ status: 503 }] });
    await sdk.json(await sdk.make(), 4).catch(() => {});
    expect(fs.requests()).toBe(3);
  });

  it("a stream cut before content is retried unseen; one cut after content is not", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "cut" } }] });
    const c = await sdk.make();
    expect(await sdk.stream(c)).toBe(TEXT);
    expect(fs.requests()).toBe(2);
    fs.script({ rules: [{ stream: { after: 2, action: "cut" } }] });
    fs.server.resetStats();
    const e = await sdk.stream(c).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(Error);
    expect(fs.requests()).toBe(1);
  });

  it("a journaled run started again answers its finished JSON and streamed calls from the journal", async () => {
    const journal = new MemoryJournal();
    const once = async (run: Run) => {
      const c = await sdk.make(run);
      return [await sdk.json(c), await sdk.stream(c)];
    };
    const first = await once(new Run({ id: "r", journal }));
    expect(first).toEqual([TEXT, TEXT]);
    fs.server.resetStats();
    const again = new Run({ id: "r", journal });
    expect(await once(again)).toEqual(first);
    expect(fs.requests()).toBe(0);
    expect(again.stats.callsReplayed).toBe(2);
  });
});
