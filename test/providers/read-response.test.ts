import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { policy } from "../../src/index.ts";
import { withBreakwater } from "../../src/providers/openai.ts";
import { ReadResponse } from "../../src/providers/read-response.ts";

const TEXT = '{"id":"c","n":1}';
const from = () =>
  new Response(TEXT, {
    status: 201,
    statusText: "Created",
    headers: { "content-type": "application/json", "x-request-id": "req_1" },
  });

describe("ReadResponse: an answer already read, handed on as a Response", () => {
  it("json() gives the value parsed before, once; a second read fails as a body does", async () => {
    const value = { id: "c", n: 1 };
    const r = new ReadResponse(TEXT, from(), value);
    expect(r.bodyUsed).toBe(false);
    expect(await r.json()).toBe(value);
    expect(r.bodyUsed).toBe(true);
    await expect(r.json()).rejects.toThrow(TypeError);
    await expect(r.text()).rejects.toThrow(TypeError);
  });

  it("keeps the answer's status, headers (the same object) and url", () => {
    const f = from();
    const r = new ReadResponse(TEXT, f, undefined);
    expect([r.status, r.statusText, r.ok]).toEqual([201, "Created", true]);
    expect(r.headers).toBe(f.headers);
    expect(r.url).toBe(f.url);
  });

  it("text(), arrayBuffer(), bytes(), blob() and body give the text that came", async () => {
    expect(await new ReadResponse(TEXT, from(), undefined).text()).toBe(TEXT);
    const decode = (b: ArrayBuffer | Uint8Array) => new TextDecoder().decode(b);
    expect(decode(await new ReadResponse(TEXT, from(), undefined).arrayBuffer())).toBe(TEXT);
    expect(decode(await new ReadResponse(TEXT, from(), undefined).bytes())).toBe(TEXT);
    expect(await (await new ReadResponse(TEXT, from(), undefined).blob()).text()).toBe(TEXT);
    const r = new ReadResponse(TEXT, from(), undefined);
    expect(await new Response(r.body).text()).toBe(TEXT);
    expect(r.bodyUsed).toBe(true);
  });

  it("json() parses the text when nothing was parsed (a body that was not JSON rejects)", async () => {
    expect(await new ReadResponse(TEXT, from(), undefined).json()).toEqual({ id: "c", n: 1 });
    await expect(new ReadResponse("not json", from(), undefined).json()).rejects.toThrow(
      SyntaxError,
    );
  });

  it("clone() reads on its own; a read answer cannot be cloned", async () => {
    const r = new ReadResponse(TEXT, from(), { id: "c", n: 1 });
    const copy = r.clone();
    expect(await copy.text()).toBe(TEXT);
    expect(await r.json()).toEqual({ id: "c", n: 1 });
    expect(() => r.clone()).toThrow(TypeError);
  });
});

describe("a wrapped openai client reads the request as the object it was handed", () => {
  const answer = JSON.stringify({
    id: "c",
    object: "chat.completion",
    created: 1,
    model: "gpt-test",
    choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  });
  const fetch: typeof globalThis.fetch = async () =>
    new Response(answer, { headers: { "content-type": "application/json" } });

  it("the request's model labels the call without the body parsed again, and asResponse() reads", async () => {
    const models: string[] = [];
    const p = policy({
      observe: {
        call: (info) => {
          models.push(String(info.model));
          return undefined;
        },
      },
    });
    const client = withBreakwater(
      new OpenAI({ apiKey: "k", baseURL: "http://x.local/v1", fetch }),
      {
        policy: p,
      },
    );
    const messages = [{ role: "user" as const, content: "hello" }];
    const parse = JSON.parse;
    const parsed: string[] = [];
    JSON.parse = (text: string, ...rest: never[]) => {
      parsed.push(text);
      return parse(text, ...rest);
    };
    try {
      const r = await client.chat.completions.create({ model: "gpt-test", messages });
      expect(r.choices[0]?.message.content).toBe("hi");
    } finally {
      JSON.parse = parse;
    }
    expect(models).toEqual(["gpt-test"]);
    // The answer is parsed once (by breakwater, for the SDK); the request never.
    expect(parsed.filter((t) => t.includes('"messages"'))).toEqual([]);
    expect(parsed.filter((t) => t === answer)).toHaveLength(1);
    const raw = await client.chat.completions.create({ model: "gpt-test", messages }).asResponse();
    expect(await raw.json()).toEqual(JSON.parse(answer));
  });
});
