/**
 * A stream's head is what comes before its first content: a role chunk, keep-alives, and a
 * tool call's announcement (its id and name, no arguments yet). A cut there is retried in
 * every adapter, and the consumer sees one announcement, from the answer that went on.
 * Gemini sends a function call whole, in one chunk: it has no announcement to cut after.
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { ChatOpenAI } from "@langchain/openai";
import { streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { breakwaterMiddleware } from "../../src/providers/ai-sdk.ts";
import { withBreakwater as anthropic } from "../../src/providers/anthropic.ts";
import { guardedFetch } from "../../src/providers/fetch.ts";
import { withBreakwater as langchain } from "../../src/providers/langchain.ts";
import { withBreakwater as openai } from "../../src/providers/openai.ts";
import { announcedThenCut, testPolicy, useFaultServer } from "./fixture.ts";

const fs = useFaultServer();
const ARGS = '{"order":77,"cents":1999}';
/** The first answer announces `charge` and is cut before its first piece of arguments. */
const cutAfterAnnouncement = () =>
  fs.script({
    rules: [announcedThenCut(ARGS), { text: "", toolCalls: [{ name: "charge", arguments: ARGS }] }],
  });
const messages = [{ role: "user" as const, content: "charge it" }];
const base = () => `${fs.server.url}/v1`;

describe("a cut after a tool call's announcement, before its arguments, is retried", () => {
  it("openai chat: one call, whole, from the second answer", async () => {
    cutAfterAnnouncement();
    const oa = openai(new OpenAI({ baseURL: base(), apiKey: "sk-test" }), {
      policy: testPolicy().p,
    });
    const stream = oa.chat.completions.stream({ model: "gpt-test", messages });
    const done = await stream.finalChatCompletion();
    const calls = done.choices[0]!.message.tool_calls ?? [];
    expect(
      calls.map((c) => c.type === "function" && [c.function.name, c.function.arguments]),
    ).toEqual([["charge", ARGS]]);
    expect(fs.requests()).toBe(2);
  });

  it("openai Responses: the function call's arguments once", async () => {
    cutAfterAnnouncement();
    const oa = openai(new OpenAI({ baseURL: base(), apiKey: "sk-test" }), {
      policy: testPolicy().p,
    });
    const added: string[] = [];
    let args = "";
    for await (const e of await oa.responses.create({
      model: "gpt-test",
      input: "go",
      stream: true,
    })) {
      if (e.type === "response.output_item.added" && e.item.type === "function_call")
        added.push(e.item.name);
      if (e.type === "response.function_call_arguments.delta") args += e.delta;
    }
    expect([added, args]).toEqual([["charge"], ARGS]);
    expect(fs.requests()).toBe(2);
  });

  it("anthropic: one tool_use block, its input whole", async () => {
    cutAfterAnnouncement();
    const an = anthropic(new Anthropic({ baseURL: fs.server.url, apiKey: "sk-ant-test" }), {
      policy: testPolicy().p,
    });
    const msg = await an.messages
      .stream({ model: "claude-test", max_tokens: 100, messages })
      .finalMessage();
    const uses = msg.content.filter((b) => b.type === "tool_use");
    expect(uses.map((b) => [b.name, b.input])).toEqual([["charge", JSON.parse(ARGS)]]);
    expect(fs.requests()).toBe(2);
  });

  it.each([
    ["chat", () => createOpenAI({ baseURL: base(), apiKey: "sk-test" }).chat("gpt-test")],
    ["responses", () => createOpenAI({ baseURL: base(), apiKey: "sk-test" }).responses("gpt-test")],
    ["anthropic", () => createAnthropic({ baseURL: base(), apiKey: "sk-ant-test" })("claude-test")],
  ] as const)("the AI SDK middleware (%s): tool-input-start is a head", async (_, make) => {
    cutAfterAnnouncement();
    const model = wrapLanguageModel({
      model: make(),
      middleware: breakwaterMiddleware({ policy: testPolicy().p }),
    });
    const errors: unknown[] = [];
    const r = streamText({
      model,
      prompt: "go",
      maxRetries: 0,
      onError: ({ error }) => void errors.push(error),
    });
    const starts: string[] = [];
    let args = "";
    for await (const part of r.fullStream) {
      if (part.type === "tool-input-start") starts.push(part.toolName);
      if (part.type === "tool-input-delta") args += part.delta;
    }
    expect({ errors, starts, args }).toEqual({ errors: [], starts: ["charge"], args: ARGS });
    expect(fs.requests()).toBe(2);
  });

  it("LangChain: a tool_call_chunk without args is a head", async () => {
    cutAfterAnnouncement();
    const model = langchain(
      new ChatOpenAI({ model: "gpt-test", apiKey: "sk-test", configuration: { baseURL: base() } }),
      { policy: testPolicy().p },
    );
    let args = "";
    const names: string[] = [];
    for await (const chunk of await model.stream("go"))
      for (const t of chunk.tool_call_chunks ?? []) {
        if (t.name) names.push(t.name);
        args += t.args ?? "";
      }
    expect([names, args]).toEqual([["charge"], ARGS]);
    expect(fs.requests()).toBe(2);
  });
});

describe("guardedFetch with no dialect reads a request by its path", () => {
  const post = (f: typeof fetch, path: string, body: object) =>
    f(`${base()}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  it("a chat stream cut after its role chunk and a tool call's announcement: retried", async () => {
    cutAfterAnnouncement();
    const f = guardedFetch({ policy: testPolicy().p });
    const res = await post(f, "/chat/completions", { model: "m", stream: true, messages });
    const text = await res.text();
    expect(text).toContain("[DONE]");
    expect(text.match(/"name":"charge"/g)).toHaveLength(1); // one announcement reached the reader
    expect(fs.requests()).toBe(2);
  });

  it("the body is sent as given (no usage chunk asked for); usage reaches the ledger", async () => {
    fs.script({});
    const sent: string[] = [];
    const t = testPolicy();
    const f = guardedFetch({
      policy: t.p,
      fetch: (u, init) => {
        sent.push(String(init?.body));
        return fetch(u, init);
      },
    });
    const body = { model: "m", stream: true, messages };
    await (await post(f, "/chat/completions", body)).text();
    await (await post(f, "/chat/completions", { model: "m", messages })).json();
    expect(sent[0]).toBe(JSON.stringify(body));
    expect(t.ledgers.at(-1)?.usage.inputTokens).toBeGreaterThan(0);
  });

  it("a path no dialect names is read blind: a cut after its first event is not retried", async () => {
    cutAfterAnnouncement();
    // The layer sees /my-llm; the server is sent the chat path.
    const f = guardedFetch({
      policy: testPolicy().p,
      fetch: (u, init) => fetch(String(u).replace("/my-llm", "/v1/chat/completions"), init),
    });
    const res = await f(`${fs.server.url}/my-llm`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", stream: true, messages }),
    });
    const read = await res.text().catch((e: unknown) => e);
    expect(read).toBeInstanceOf(Error);
    expect(fs.requests()).toBe(1);
  });
});
