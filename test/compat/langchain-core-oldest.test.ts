/**
 * The LangChain adapter on the oldest `@langchain/core` the peer range claims (1.0.0,
 * installed as the npm alias `langchain-core-v1`). The provider packages (`@langchain/openai`
 * and the rest) need a newer core, so the model here is a chat model of core 1.0.0's own
 * `BaseChatModel`, calling the fault server through the openai SDK: what the adapter
 * changes (the AsyncCaller, `_generate`, `_streamResponseChunks`, invoke, stream, batch) is
 * core's, at 1.0.0.
 */
import { readFileSync } from "node:fs";
import { BaseChatModel } from "langchain-core-v1/language_models/chat_models";
import { AIMessage, AIMessageChunk, type BaseMessage } from "langchain-core-v1/messages";
import { ChatGenerationChunk, type ChatResult } from "langchain-core-v1/outputs";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { reasonOf } from "../../src/core/errors.ts";
import { withBreakwater } from "../../src/providers/langchain.ts";
import { TEXT, testPolicy, useFaultServer } from "../providers/fixture.ts";

const fs = useFaultServer();
const version = (pkg: string): string =>
  JSON.parse(
    readFileSync(new URL(`../../node_modules/${pkg}/package.json`, import.meta.url), "utf8"),
  ).version;

type Turn = { role: "user" | "assistant"; content: string };
const turns = (messages: BaseMessage[]): Turn[] =>
  messages.map((m) => ({
    role: m.getType() === "ai" ? "assistant" : "user",
    content: String(m.content),
  }));

/** A chat model of @langchain/core 1.0.0: JSON and streamed chat completions. */
class ChatFault extends BaseChatModel {
  readonly client = new OpenAI({
    baseURL: `${fs.server.url}/v1`,
    apiKey: "sk-test",
    maxRetries: 0,
  });
  _llmType() {
    return "chat-fault";
  }
  async _generate(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
  ): Promise<ChatResult> {
    const r = await this.client.chat.completions.create(
      { model: "gpt-test", messages: turns(messages) },
      { signal: options.signal },
    );
    const text = r.choices[0]?.message.content ?? "";
    return { generations: [{ text, message: new AIMessage(text) }] };
  }
  override async *_streamResponseChunks(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
  ) {
    const s = await this.client.chat.completions.create(
      { model: "gpt-test", messages: turns(messages), stream: true },
      { signal: options.signal },
    );
    for await (const c of s) {
      const text = c.choices[0]?.delta.content ?? "";
      yield new ChatGenerationChunk({ text, message: new AIMessageChunk(text) });
    }
  }
}

// The adapter is typed by the @langchain/core it resolves (here the latest; in a project
// on 1.0.0, that one): the alias's class is another type, the same shape.
type Model = Parameters<typeof withBreakwater>[0];
const wrapped = () =>
  withBreakwater(new ChatFault({}) as unknown as Model, { policy: testPolicy().p });

describe(`@langchain/core ${version("langchain-core-v1")}`, () => {
  it("is the oldest the peer range claims", () => {
    expect(version("langchain-core-v1")).toBe("1.0.0");
  });

  it("invoke: 503 twice, then the answer; an endless 503 is 3 requests, not LangChain's 7", async () => {
    fs.script({ rules: [{ requests: [1, 2], status: 503 }] });
    expect((await wrapped().invoke("hi")).content).toBe(TEXT);
    expect(fs.requests()).toBe(3);
    fs.script({ rules: [{ status: 503 }] });
    fs.server.resetStats();
    const e = await wrapped()
      .invoke("hi")
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect(fs.requests()).toBe(3);
  });

  it("stream: a cut before content is retried; a cut after content is shown once", async () => {
    const read = async () => {
      let text = "";
      try {
        for await (const c of await wrapped().stream("hi")) text += String(c.content);
        return { text, error: undefined as unknown };
      } catch (error) {
        return { text, error };
      }
    };
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "cut" } }] });
    expect(await read()).toEqual({ text: TEXT, error: undefined });
    expect(fs.requests()).toBe(2);
    fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    fs.server.resetStats();
    const cut = await read();
    expect(cut.text).toBe("The fault server ");
    expect(reasonOf(cut.error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);
  });

  it("batch: each call under the policy", async () => {
    fs.script({ rules: [{ requests: [1, 1], status: 503 }] });
    const r = await wrapped().batch(["one", "two"]);
    expect(r.map((m) => m.content)).toEqual([TEXT, TEXT]);
    expect(fs.requests()).toBe(3);
  });
});
