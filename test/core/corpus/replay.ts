import { createServer, type IncomingMessage, type Server } from "node:http";
import { crc32 } from "node:zlib";
import { createAmazonBedrock } from "@ai-sdk/amazon-bedrock";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import type { LanguageModelV4 } from "@ai-sdk/provider";
import Anthropic from "@anthropic-ai/sdk";
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  InvokeModelCommand,
  InvokeModelWithResponseStreamCommand,
} from "@aws-sdk/client-bedrock-runtime";
import { GoogleGenAI } from "@google/genai";
import { Mistral } from "@mistralai/mistralai";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { generateText, streamText, wrapLanguageModel } from "ai";
import OpenAI from "openai";
import { throwIfNotOk } from "../../../src/index.ts";
import { breakwaterMiddleware } from "../../../src/providers/ai-sdk.ts";
import { responsesInBand } from "../../../src/providers/openai.ts";

/** One real error response, as a provider sent it, with where it comes from. */
export interface Case {
  readonly id: string;
  readonly provider: string;
  readonly api: string;
  readonly stream: boolean;
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly provenance: string;
  readonly reconstructed: boolean;
  readonly expect: { retryable: boolean; kind: string; retryAfterMs: number | null };
  /** Where one client loses what the body said, what it leaves (and why). */
  readonly expectVia?: Record<string, { retryable: boolean; kind: string; why: string }>;
  /** Why the expectation differs from what the collector first proposed. */
  readonly decided?: string;
  readonly note: string;
}

/** What a case should classify as when read through `client`. */
export const expected = (c: Case, client: string) => c.expectVia?.[client] ?? c.expect;

/** How a user's code meets the response: the real SDK they would use, called as they
 * would call it. Each returns the error the SDK raised (undefined if it raised none). */
export type Client = (url: string, c: Case) => Promise<unknown>;

const caught = (p: Promise<unknown>) =>
  p
    .then(
      () => undefined,
      (e: unknown) => ({ error: e }),
    )
    .then((r) => r?.error);

async function drain(it: AsyncIterable<unknown>) {
  for await (const _ of it);
}

const prompt = [{ role: "user" as const, content: "hi" }];

export const openaiSdk: Client = (url, c) => {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "sk-test", maxRetries: 0 });
  const model = "gpt-4o-mini";
  if (c.api === "responses" && c.stream)
    return caught(
      client.responses.create({ model, input: "hi", stream: true }).then(async (events) => {
        // The SDK hands `error` and `response.failed` events over as events; breakwater's
        // openai adapter reads them as in-band errors (responsesInBand).
        for await (const event of events) {
          const inBand = responsesInBand(event);
          if (inBand !== undefined) throw inBand;
        }
      }),
    );
  if (c.api === "responses") return caught(client.responses.create({ model, input: "hi" }));
  if (c.api === "embeddings") return caught(client.embeddings.create({ model, input: "hi" }));
  if (c.api === "completions") return caught(client.completions.create({ model, prompt: "hi" }));
  return caught(
    c.stream
      ? client.chat.completions.create({ model, messages: prompt, stream: true }).then(drain)
      : client.chat.completions.create({ model, messages: prompt }),
  );
};

/** The AI SDK over @ai-sdk/openai: an APICallError (or an error part in a stream). */
export const aiSdkOpenAI: Client = (url, c) =>
  aiSdk(createOpenAI({ baseURL: `${url}/v1`, apiKey: "sk-test" }).chat("gpt-4o-mini"), c);
export const aiSdkAnthropic: Client = (url, c) =>
  aiSdk(createAnthropic({ baseURL: `${url}/v1`, apiKey: "sk-ant-test" })("claude-sonnet-4-6"), c);
export const aiSdkGoogle: Client = (url, c) =>
  aiSdk(
    createGoogleGenerativeAI({ baseURL: `${url}/v1beta`, apiKey: "test" })("gemini-2.5-flash"),
    c,
  );

export const aiSdkBedrock: Client = (url, c) =>
  aiSdk(
    createAmazonBedrock({
      baseURL: url,
      region: "us-east-1",
      accessKeyId: "AKIDTEST",
      secretAccessKey: "secret",
    })("anthropic.claude-3-5-sonnet-20240620-v1:0"),
    c,
  );

/** A call as an AI SDK user makes it with breakwater: `maxRetries: 0`, and for streams the
 * breakwater middleware (one attempt), which is what reads errors a provider's stream
 * parser drops (see aiSdkInBand). */
async function aiSdk(model: LanguageModelV4, c: Case): Promise<unknown> {
  if (!c.stream) return caught(generateText({ model, prompt: "hi", maxRetries: 0 }));
  let error: unknown;
  const wrapped = wrapLanguageModel({
    model,
    middleware: breakwaterMiddleware({ policy: { maxAttempts: 1 } }),
  });
  const r = streamText({
    model: wrapped,
    prompt: "hi",
    maxRetries: 0,
    onError: ({ error: e }) => void (error ??= e),
  });
  await drain(r.fullStream).catch((e: unknown) => void (error ??= e));
  return error;
}

export const anthropicSdk: Client = (url, c) => {
  const client = new Anthropic({ baseURL: url, apiKey: "sk-ant-test", maxRetries: 0 });
  const body = { model: "claude-sonnet-4-6", max_tokens: 64, messages: prompt };
  return caught(
    c.stream
      ? client.messages.create({ ...body, stream: true }).then(drain)
      : client.messages.create(body),
  );
};

export const googleSdk: Client = (url, c) => {
  const ai = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: url } });
  const req = { model: "gemini-2.5-flash", contents: "hi" };
  return caught(
    c.api === "streamGenerateContent"
      ? ai.models.generateContentStream(req).then(drain)
      : ai.models.generateContent(req),
  );
};

export const bedrockSdk: Client = (url, c) => {
  const client = new BedrockRuntimeClient({
    endpoint: url,
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDTEST", secretAccessKey: "secret" },
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler(), // HTTP/1.1 to the loopback server
  });
  const modelId = "anthropic.claude-3-5-sonnet-20240620-v1:0";
  const body = new TextEncoder().encode(
    JSON.stringify({ anthropic_version: "bedrock-2023-05-31", max_tokens: 64, messages: prompt }),
  );
  const converse = { modelId, messages: [{ role: "user" as const, content: [{ text: "hi" }] }] };
  const send = async () => {
    if (c.api === "converse") return client.send(new ConverseCommand(converse));
    if (c.api === "invokeModel") return client.send(new InvokeModelCommand({ modelId, body }));
    const out =
      c.api === "converseStream"
        ? (await client.send(new ConverseStreamCommand(converse))).stream
        : (await client.send(new InvokeModelWithResponseStreamCommand({ modelId, body }))).body;
    if (out) await drain(out as AsyncIterable<unknown>);
  };
  return caught(send());
};

export const mistralSdk: Client = (url, c) => {
  const client = new Mistral({ apiKey: "test", serverURL: url, retryConfig: { strategy: "none" } });
  return caught(
    c.api === "embeddings"
      ? client.embeddings.create({ model: "mistral-embed", inputs: ["hi"] })
      : client.chat.complete({ model: "mistral-small-latest", messages: prompt }),
  );
};

/** A plain fetch through breakwater's own helper, as for an API with no SDK in use. */
export const fetchHelper: Client = async (url) =>
  caught(fetch(`${url}/v1/chat`, { method: "POST", body: "{}" }).then(throwIfNotOk));

/** Ollama's native NDJSON stream, read as its own client (ollama-js) reads it: an `error`
 * line is thrown as `new Error(error)`. */
export const ollamaNdjson: Client = async (url) =>
  caught(
    (async () => {
      const res = await throwIfNotOk(
        await fetch(`${url}/api/chat`, { method: "POST", body: "{}" }),
      );
      for (const line of (await res.text()).split("\n")) {
        if (!line.trim()) continue;
        const part = JSON.parse(line) as { error?: string };
        if (part.error !== undefined) throw new Error(part.error);
      }
    })(),
  );

/** One AWS event-stream message (the binary framing Bedrock streams use). */
function eventMessage(headers: Record<string, string>, payload: string): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const n = Buffer.from(name);
    const v = Buffer.from(value);
    const h = Buffer.alloc(1 + n.length + 1 + 2 + v.length);
    h.writeUInt8(n.length, 0);
    n.copy(h, 1);
    h.writeUInt8(7, 1 + n.length); // string
    h.writeUInt16BE(v.length, 2 + n.length);
    v.copy(h, 4 + n.length);
    parts.push(h);
  }
  const head = Buffer.concat(parts);
  const body = Buffer.from(payload);
  const total = 12 + head.length + body.length + 4;
  const prelude = Buffer.alloc(12);
  prelude.writeUInt32BE(total, 0);
  prelude.writeUInt32BE(head.length, 4);
  prelude.writeUInt32BE(crc32(prelude.subarray(0, 8)), 8);
  const msg = Buffer.concat([prelude, head, body, Buffer.alloc(4)]);
  msg.writeUInt32BE(crc32(msg.subarray(0, total - 4)), total - 4);
  return msg;
}

/** What the server sends for a case: an in-band stream event is framed as its wire has it
 * (SSE, or an AWS event-stream message); anything else goes as it is. */
function respond(
  c: Case,
  req: IncomingMessage,
): { status: number; headers: Record<string, string>; body: Buffer } {
  const awsEvent = Object.keys(c.headers).some((h) => h.startsWith(":"));
  if (awsEvent)
    return {
      status: 200,
      headers: { "content-type": "application/vnd.amazon.eventstream" },
      body: eventMessage(c.headers, c.body),
    };
  const sse = c.status === 200 && (c.body.startsWith("data:") || c.body.startsWith("event:"));
  const geminiStream = c.status === 200 && c.api === "streamGenerateContent" && !sse;
  const headers = { ...c.headers };
  if (sse) {
    headers["content-type"] = "text/event-stream";
    // An event ends at a blank line; a report's excerpt may stop short of it.
    return {
      status: 200,
      headers,
      body: Buffer.from(c.body.endsWith("\n\n") ? c.body : `${c.body.trimEnd()}\n\n`),
    };
  }
  if (geminiStream) {
    headers["content-type"] = "text/event-stream";
    return { status: 200, headers, body: Buffer.from(`data: ${c.body}\n\n`) };
  }
  if (req.url?.includes("alt=sse") && c.status === 200 && !sse)
    headers["content-type"] = "text/event-stream";
  headers["content-type"] ??= "application/json";
  return { status: c.status, headers, body: Buffer.from(c.body) };
}

/** Serves `c` to every request on a loopback port for the length of `fn`. */
export async function withServer<T>(c: Case, fn: (url: string) => Promise<T>): Promise<T> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const r = respond(c, req);
      res.writeHead(r.status, { ...r.headers, "content-length": String(r.body.length) });
      res.end(r.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  try {
    return await fn(`http://127.0.0.1:${port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const OPENAI_COMPATIBLE = new Set([
  "openai",
  "azure-openai",
  "groq",
  "deepseek",
  "openrouter",
  "xai",
  "together",
  "fireworks",
  "vllm",
  "ollama",
]);

/** The clients a case is replayed through: the SDKs its users would use. */
export function clientsFor(c: Case): [string, Client][] {
  if (c.api === "native" && c.provider === "ollama" && c.stream)
    return [["ollama NDJSON", ollamaNdjson]];
  if (c.api === "native") return [["fetch + throwIfNotOk", fetchHelper]];
  if (c.provider === "mistral")
    return [
      ["@mistralai/mistralai", mistralSdk],
      ["fetch + throwIfNotOk", fetchHelper],
    ];
  if (OPENAI_COMPATIBLE.has(c.provider)) {
    const both: [string, Client][] = [["openai", openaiSdk]];
    if (c.api === "chat.completions") both.push(["ai-sdk (@ai-sdk/openai)", aiSdkOpenAI]);
    return both;
  }
  if (c.provider === "cohere") return [["fetch + throwIfNotOk", fetchHelper]];
  if (c.provider === "anthropic" || c.provider === "anthropic-vertex")
    return [
      ["@anthropic-ai/sdk", anthropicSdk],
      ["ai-sdk (@ai-sdk/anthropic)", aiSdkAnthropic],
    ];
  if (c.provider === "gemini" || c.provider === "gemini-vertex")
    return [
      ["@google/genai", googleSdk],
      ["ai-sdk (@ai-sdk/google)", aiSdkGoogle],
    ];
  if (c.provider === "bedrock" || c.provider === "anthropic-bedrock")
    return [
      ["@aws-sdk/client-bedrock-runtime", bedrockSdk],
      ["ai-sdk (@ai-sdk/amazon-bedrock)", aiSdkBedrock],
    ];
  throw new Error(`no client for provider ${c.provider}`);
}
