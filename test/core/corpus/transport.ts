import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { BedrockRuntimeClient, ConverseCommand } from "@aws-sdk/client-bedrock-runtime";
import { GoogleGenAI } from "@google/genai";
import { Mistral } from "@mistralai/mistralai";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { generateText } from "ai";
import OpenAI from "openai";
import { throwIfNotOk } from "../../../src/index.ts";

/**
 * The ways a connection fails before an answer, made real on loopback: each SDK meets them
 * as users do, so the error object is the one users get.
 */
export type Fault = "refused" | "reset" | "cut mid-body" | "dns" | "tls" | "silent" | "abort";

/** How one call is made: where to, the client's own timeout, the caller's signal. */
export interface Attempt {
  readonly url: string;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

export type TransportClient = (a: Attempt) => Promise<unknown>;

const caught = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

const messages = [{ role: "user" as const, content: "hi" }];

/** A caller's signal and the client's own timeout as one signal, for clients that take only
 * a signal (the AI SDK, fetch): what users write is `AbortSignal.timeout(ms)`. */
const signalOf = (a: Attempt) =>
  a.timeoutMs !== undefined ? AbortSignal.timeout(a.timeoutMs) : a.signal;

export const TRANSPORT_CLIENTS: Record<string, TransportClient> = {
  openai: (a) =>
    caught(
      new OpenAI({
        baseURL: `${a.url}/v1`,
        apiKey: "sk-test",
        maxRetries: 0,
        timeout: a.timeoutMs ?? 60_000,
      }).chat.completions.create({ model: "gpt-4o-mini", messages }, { signal: a.signal }),
    ),
  "@anthropic-ai/sdk": (a) =>
    caught(
      new Anthropic({
        baseURL: a.url,
        apiKey: "sk-ant-test",
        maxRetries: 0,
        timeout: a.timeoutMs ?? 60_000,
      }).messages.create(
        { model: "claude-sonnet-4-6", max_tokens: 8, messages },
        { signal: a.signal },
      ),
    ),
  "@google/genai": (a) =>
    caught(
      new GoogleGenAI({
        apiKey: "test",
        httpOptions: { baseUrl: a.url, timeout: a.timeoutMs },
      }).models.generateContent({
        model: "gemini-2.5-flash",
        contents: "hi",
        config: { abortSignal: a.signal, httpOptions: { retryOptions: { attempts: 1 } } },
      }),
    ),
  "@aws-sdk/client-bedrock-runtime": (a) =>
    caught(
      new BedrockRuntimeClient({
        endpoint: a.url,
        region: "us-east-1",
        credentials: { accessKeyId: "AKIDTEST", secretAccessKey: "secret" },
        maxAttempts: 1,
        requestHandler: new NodeHttpHandler({
          requestTimeout: a.timeoutMs,
          connectionTimeout: a.timeoutMs,
          throwOnRequestTimeout: true, // else smithy only logs a warning and waits on
        }),
      }).send(
        new ConverseCommand({
          modelId: "m",
          messages: [{ role: "user", content: [{ text: "hi" }] }],
        }),
        {
          abortSignal: a.signal,
        },
      ),
    ),
  "@mistralai/mistralai": (a) =>
    caught(
      new Mistral({
        apiKey: "test",
        serverURL: a.url,
        retryConfig: { strategy: "none" },
      }).chat.complete(
        { model: "mistral-small-latest", messages },
        {
          ...(a.timeoutMs !== undefined && { timeoutMs: a.timeoutMs }),
          ...(a.signal && { fetchOptions: { signal: a.signal } }),
        },
      ),
    ),
  "ai-sdk (@ai-sdk/openai)": (a) =>
    caught(
      generateText({
        model: createOpenAI({ baseURL: `${a.url}/v1`, apiKey: "sk-test" }).chat("gpt-4o-mini"),
        prompt: "hi",
        maxRetries: 0,
        abortSignal: signalOf(a),
      }),
    ),
  "fetch + throwIfNotOk": (a) =>
    caught(
      fetch(`${a.url}/v1/chat`, { method: "POST", body: "{}", signal: signalOf(a) })
        .then(throwIfNotOk)
        .then((r) => r.json()),
    ),
};

const TLS = join(import.meta.dirname, "tls");

/** A loopback server that fails each request as `fault` says. */
function faultyServer(fault: Fault): Server {
  const handler = (
    req: import("node:http").IncomingMessage,
    res: import("node:http").ServerResponse,
  ) => {
    req.resume();
    if (fault === "reset") return void (req.socket as Socket).resetAndDestroy();
    if (fault === "cut mid-body") {
      res.writeHead(200, { "content-type": "application/json", "content-length": "4096" });
      res.write('{"id":"chatcmpl-1","choices":[{"message":{"content":"Hel');
      setTimeout(() => req.socket.destroy(), 20);
      return;
    }
    // "silent" and "abort": the request is read and never answered.
  };
  return fault === "tls"
    ? createTlsServer(
        {
          key: readFileSync(join(TLS, "self-signed.key")),
          cert: readFileSync(join(TLS, "self-signed.crt")),
        },
        handler,
      )
    : createServer(handler);
}

/** Runs `fn` against a server that fails as `fault` says (or against no server at all). */
export async function withFault<T>(fault: Fault, fn: (url: string) => Promise<T>): Promise<T> {
  if (fault === "dns") return fn("http://breakwater-test.invalid"); // RFC 2606: never resolves
  const server = faultyServer(fault);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const scheme = fault === "tls" ? "https" : "http";
  if (fault === "refused") await new Promise((resolve) => server.close(resolve)); // nothing listens now
  try {
    return await fn(`${scheme}://127.0.0.1:${port}`);
  } finally {
    if (fault !== "refused") {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }
}
