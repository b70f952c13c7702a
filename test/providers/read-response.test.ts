import OpenAI from "openai";
import { VERSION } from "openai/version";
import { describe, expect, it } from "vitest";
import { policy } from "../../src/index.ts";
import { guardedFetch } from "../../src/providers/fetch.ts";
import { withBreakwater } from "../../src/providers/openai.ts";
import { ReadResponse } from "../../src/providers/read-response.ts";
import { scopedClient } from "../../src/providers/scope.ts";

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

  it("clone() reads on its own, its own value; a read answer cannot be cloned", async () => {
    const r = new ReadResponse(TEXT, from(), { id: "c", n: 1 });
    const copy = r.clone();
    const a = await copy.json();
    const b = await r.json();
    expect(a).toEqual(b);
    expect(a).not.toBe(b); // the SDK writes on what it gets
    expect(() => r.clone()).toThrow(TypeError);
  });

  it("after a read, every reader rejects and the body is a used, locked stream", async () => {
    for (const read of ["arrayBuffer", "bytes", "blob", "text", "json"] as const) {
      const r = new ReadResponse(TEXT, from(), { id: "c", n: 1 });
      await r.json();
      await expect(r[read](), read).rejects.toThrow(TypeError);
      expect(r.body?.locked, read).toBe(true);
      expect(r.bodyUsed, read).toBe(true);
    }
  });

  it("a body looked at but not read (anthropic's SDK) still hands over the value read before", async () => {
    const value = { id: "c", n: 1 };
    const r = new ReadResponse(TEXT, from(), value);
    const looked = r.body;
    expect(looked?.locked).toBe(false);
    expect(await r.json()).toBe(value);
    expect(r.bodyUsed).toBe(true);
    expect(looked?.locked).toBe(true); // as a real Response's body after json()
    await expect(r.text()).rejects.toThrow(TypeError);
    // A body someone reads is that reader's: json() then fails as it would.
    const s = new ReadResponse(TEXT, from(), value);
    expect(await new Response(s.body).text()).toBe(TEXT);
    await expect(s.json()).rejects.toThrow(TypeError);
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
    // The request is never parsed. The answer is parsed once by breakwater, for the SDK;
    // openai >= 7 reads it as text (`text()`, then its own JSON.parse), so there twice.
    expect(parsed.filter((t) => t.includes('"messages"'))).toEqual([]);
    const sdk7 = Number(VERSION.split(".")[0]);
    expect(parsed.filter((t) => t === answer)).toHaveLength(sdk7 >= 7 ? 2 : 1);
    const raw = await client.chat.completions.create({ model: "gpt-test", messages }).asResponse();
    expect(await raw.json()).toEqual(JSON.parse(answer));
  });
});

describe("the request object is read only for the very text the SDK made of it", () => {
  /** A Stainless-shaped client whose method builds the JSON body and sends `send(text)`. */
  const client = (send: (text: string) => string) => {
    const seen: unknown[] = [];
    const fetch = guardedFetch({
      fetch: async () => new Response("{}", { headers: { "content-type": "application/json" } }),
      policy: policy(),
      dialect: {
        isContent: () => true,
        model: (_url, body) => {
          seen.push(body);
          return (body as { model?: string } | undefined)?.model;
        },
      },
    });
    const c = scopedClient(
      {
        buildBody: ({ options }: { options: { body: object } }) => ({
          body: JSON.stringify(options.body),
        }),
        async makeRequest(options: { body: object }) {
          const { body } = this.buildBody({ options });
          return fetch("http://x.local/v1/chat/completions", { method: "POST", body: send(body) });
        },
        withOptions() {
          return this;
        },
      },
      "test",
    );
    return { c, seen };
  };

  it("the object when the text is the SDK's; the text's own reading when it is not", async () => {
    const params = { model: "m", messages: [] };
    const same = client((text) => text);
    await same.c.makeRequest({ body: params });
    expect(same.seen).toEqual([params]);
    // A copy: changed after it was sent, the request reads as it was sent.
    params.messages.push({ role: "user", content: "later" } as never);
    expect(same.seen).toEqual([{ model: "m", messages: [] }]);
    // A middleware rewrote the body (another model), or another request went out inside
    // the call: what is read is what is sent.
    const rewritten = client((text) => text.replace('"m"', '"routed"'));
    await rewritten.c.makeRequest({ body: { model: "m", messages: [] } });
    expect(rewritten.seen).toEqual([{ model: "routed", messages: [] }]);
  });
});
