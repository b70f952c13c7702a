/**
 * langchain v1 `createAgent` (the version npm serves) with breakwater's middleware, against
 * the fault server: one retry layer for the agent's model calls, fallbacks under it.
 */
import { HumanMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { createAgent, modelRetryMiddleware } from "langchain";
import { describe, expect, it } from "vitest";
import { ledgerOf, reasonOf } from "../../src/core/errors.ts";
import { agentMiddleware, withBreakwater } from "../../src/providers/langchain.ts";
import { TEXT, testPolicy, useFaultServer, useWarnings } from "./fixture.ts";

const fs = useFaultServer();
const warnings = useWarnings();
const chat = (model = "gpt-test") =>
  new ChatOpenAI({ model, apiKey: "sk-test", configuration: { baseURL: `${fs.server.url}/v1` } });
const ask = { messages: [{ role: "user", content: "hi" }] };
const lastText = (r: { messages: { content: unknown }[] }) => String(r.messages.at(-1)?.content);

describe("createAgent with agentMiddleware()", () => {
  it("a healthy call: one request, the model's text", async () => {
    fs.script({});
    const agent = createAgent({
      model: chat(),
      middleware: [agentMiddleware({ policy: testPolicy().p })],
    });
    expect(lastText(await agent.invoke(ask))).toBe(TEXT);
    expect(fs.requests()).toBe(1);
  });

  it("an endless 503: the policy's 3 requests and its error (ChatOpenAI's 6 retries off)", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const agent = createAgent({
      model: chat(),
      middleware: [agentMiddleware({ policy: testPolicy().p })],
    });
    const error = await agent.invoke(ask).catch((e: unknown) => e);
    expect(reasonOf(error)).toBe("attempts-exhausted");
    expect(ledgerOf(error)?.attempts).toHaveLength(3);
    expect(fs.requests()).toBe(3);
  });

  it("modelRetryMiddleware kept over a wrapped model: its retries get the give-up back, nothing sent (9 requests before); said once", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const agent = createAgent({
      model: withBreakwater(chat(), { policy: testPolicy().p }),
      middleware: [modelRetryMiddleware({ initialDelayMs: 1, jitter: false })],
    });
    const r = await agent.invoke(ask);
    // Its own answer to a give-up stays its own: agentMiddleware() raises the error instead.
    expect(lastText(r)).toMatch(/^Model call failed after 3 attempts/);
    expect(fs.requests()).toBe(3);
    const said = await warnings.settled();
    expect(
      said.filter((w) =>
        w.includes("(modelRetryMiddleware, withRetry or a retry loop) asked again"),
      ),
    ).toHaveLength(1);
  });

  it("a streamed call asked again with the same message objects within the window: the same give-up, nothing sent", async () => {
    fs.script({ rules: [{ status: 503 }] });
    const model = withBreakwater(chat(), { policy: testPolicy().p });
    const messages = [new HumanMessage("hi")]; // a retry hands the same objects back
    const read = async () => {
      try {
        for await (const _ of await model.stream(messages)) return "a chunk";
        return "ended";
      } catch (e) {
        return e;
      }
    };
    const first = await read();
    expect(reasonOf(first)).toBe("attempts-exhausted");
    expect(await read()).toBe(first);
    expect(fs.requests()).toBe(3);
  });

  it("a new call with the same messages after a give-up is sent: only a retry of the same call is refused", async () => {
    fs.script({ rules: [{ status: 503, times: 3 }] });
    const model = withBreakwater(chat(), { policy: testPolicy().p });
    const messages = [{ role: "user" as const, content: "hi" }];
    await expect(model.invoke(messages)).rejects.toBeDefined();
    expect(fs.requests()).toBe(3);
    expect((await model.invoke(messages)).content).toBe(TEXT);
    expect(fs.requests()).toBe(4);
  });

  it("a fallback model: the primary's 3 attempts, then the fallback's answer", async () => {
    fs.script({ rules: [{ status: 503, model: "gpt-primary" }] });
    const agent = createAgent({
      model: chat("gpt-primary"),
      middleware: [
        agentMiddleware({
          policy: testPolicy().p,
          fallbacks: [{ model: chat("gpt-backup"), policy: testPolicy().p }],
        }),
      ],
    });
    expect(lastText(await agent.invoke(ask))).toBe(TEXT);
    expect(fs.requests()).toBe(4);
  });

  it("a 400 does not move to the fallback: one request, the error", async () => {
    fs.script({ rules: [{ status: 400, model: "gpt-primary" }] });
    const agent = createAgent({
      model: chat("gpt-primary"),
      middleware: [
        agentMiddleware({ policy: testPolicy().p, fallbacks: [{ model: chat("gpt-backup") }] }),
      ],
    });
    const error = await agent.invoke(ask).catch((e: unknown) => e);
    expect(reasonOf(error)).toBe("not-retryable");
    expect(fs.requests()).toBe(1);
  });

  it("streamed tokens (streamMode messages) cut after content: shown once, one request", async () => {
    fs.script({ rules: [{ stream: { after: 3, action: "cut" } }] });
    const agent = createAgent({
      model: new ChatOpenAI({
        model: "gpt-test",
        apiKey: "sk-test",
        streaming: true,
        configuration: { baseURL: `${fs.server.url}/v1` },
      }),
      middleware: [agentMiddleware({ policy: testPolicy().p })],
    });
    let text = "";
    const error = await (async () => {
      for await (const [chunk] of await agent.stream(ask, { streamMode: "messages" }))
        text += typeof chunk.content === "string" ? chunk.content : "";
    })().catch((e: unknown) => e);
    expect(text).toBe("The fault server ");
    expect(reasonOf(error)).toBe("stream-interrupted");
    expect(fs.requests()).toBe(1);
  });

  it("bad options are refused by name", () => {
    expect(() => agentMiddleware({ fallbacks: [{ model: "gpt-4o" as never }] })).toThrow(
      /agentMiddleware: option "fallbacks\[0\]"/,
    );
    expect(() => agentMiddleware({ policy: 3 as never })).toThrow(/"policy"/);
  });
});
