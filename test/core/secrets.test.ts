import { inspect } from "node:util";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError } from "@google/genai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import {
  guardTool,
  ledgerOf,
  MemoryJournal,
  policy,
  Run,
  ToolError,
  VirtualClock,
} from "../../src/index.ts";
import { driveError } from "../helpers.ts";

/** The secret. Each shape below hides one of these forms somewhere in an error graph. */
const KEY = "sk-proj-CANARY0123456789abcdefXYZ";
const GKEY = "AIzaSyCANARY0123456789abcdefghijklmnopq";
const CANARIES = ["CANARY0123456789", "s3cr3t-T0ken-CANARY"];

/** Every way a report shows an error: what we check no canary survives. */
function renderings(e: unknown): string[] {
  const out = [inspect(e, { depth: 30, showHidden: true }), String(e)];
  try {
    out.push(JSON.stringify(e, (_k, v) => (typeof v === "bigint" ? String(v) : v)) ?? "");
  } catch {}
  const stack = (e as { stack?: unknown })?.stack;
  if (typeof stack === "string") out.push(stack);
  return out;
}

const expectNoCanary = (e: unknown) => {
  for (const text of renderings(e)) for (const c of CANARIES) expect(text).not.toContain(c);
};

const openaiHeaders = new Headers({ "x-request-id": "req_1", "openai-organization": "org" });

/** The shapes secrets were found in, each built as the real SDK or library builds it. */
const SHAPES: [string, () => unknown][] = [
  ["a message", () => Object.assign(new Error(`rejected ${KEY}`), { status: 400 })],
  [
    "OpenAI's .error.message (a real APIError)",
    () =>
      OpenAI.APIError.generate(
        401,
        { error: { message: `Incorrect API key provided: ${KEY}.`, code: "invalid_api_key" } },
        undefined,
        openaiHeaders,
      ),
  ],
  [
    "Anthropic's .error (a real APIError)",
    () =>
      Anthropic.APIError.generate(
        400,
        { type: "error", error: { type: "invalid_request_error", message: `x-api-key: ${KEY}` } },
        undefined,
        new Headers(),
      ),
  ],
  [
    "a @google/genai ApiError (the body folded into its message)",
    () =>
      new ApiError({
        status: 400,
        message: JSON.stringify({
          error: {
            code: 400,
            message: `API key not valid: key=${GKEY}`,
            status: "INVALID_ARGUMENT",
          },
        }),
      }),
  ],
  [
    "headers (a fetch Headers)",
    () =>
      Object.assign(new Error("HTTP 400"), {
        status: 400,
        headers: new Headers({ authorization: `Bearer ${KEY}`, "x-api-key": CANARIES[1]! }),
      }),
  ],
  [
    "axios-style config.headers.Authorization",
    () =>
      Object.assign(new Error("Request failed with status code 400"), {
        response: { status: 400 },
        config: { url: "https://api.example.com", headers: { Authorization: CANARIES[1] } },
      }),
  ],
  [
    "AggregateError.errors",
    () => Object.assign(new AggregateError([new Error(`inner ${KEY}`)], "many"), { status: 400 }),
  ],
  [
    "a string cause",
    () => Object.assign(new Error("x", { cause: `Bearer ${CANARIES[1]}` }), { status: 400 }),
  ],
  [
    "a stack read before the throw",
    () => {
      const e = Object.assign(new Error(`boom ${KEY}`), { status: 400 });
      void e.stack;
      return e;
    },
  ],
  [
    "a read-only message",
    () => {
      const e = Object.assign(new Error("x"), { status: 400 });
      Object.defineProperty(e, "message", {
        value: `read-only ${KEY}`,
        writable: false,
        configurable: true,
      });
      return e;
    },
  ],
  [
    "a cause nine levels deep",
    () => {
      let e: Error = new Error(`deep ${KEY}`);
      for (let i = 0; i < 10; i++) e = new Error(`level ${i}`, { cause: e });
      return Object.assign(e, { status: 400 });
    },
  ],
  [
    "Authorization: Token X",
    () => Object.assign(new Error(`Authorization: Token ${CANARIES[1]}`), { status: 400 }),
  ],
  [
    "an URL-encoded key",
    () => Object.assign(new Error(`GET /v1?x=1%26key%3D${GKEY}`), { status: 400 }),
  ],
  [
    "'x-api-key' => 'X'",
    () => Object.assign(new Error(`{'x-api-key' => '${CANARIES[1]}'}`), { status: 400 }),
  ],
  [
    "a thrown plain object",
    () => ({ status: 400, request: { headers: { "x-api-key": CANARIES[1] } } }),
  ],
  [
    "a Map of headers",
    () =>
      Object.assign(new Error("x"), {
        status: 400,
        headers: new Map([["Authorization", `Bearer ${KEY}`]]),
      }),
  ],
  [
    "credentials in an URL",
    () =>
      Object.assign(new Error(`fetch https://user:${CANARIES[1]}@api.example.com`), {
        status: 400,
      }),
  ],
  [
    "an AI SDK APICallError's responseBody",
    () =>
      Object.assign(new Error("Bad Request"), {
        name: "AI_APICallError",
        statusCode: 400,
        responseBody: JSON.stringify({ error: { message: `Incorrect API key ${KEY}` } }),
        requestBodyValues: { apiKey: CANARIES[1] },
      }),
  ],
];

describe("secrets never leave, whatever the shape (docs/architecture.md, rule 10)", () => {
  it.each(SHAPES)(
    "%s: masked in what a policy throws, the error keeps its class",
    async (_, make) => {
      const clock = new VirtualClock();
      const thrown = make();
      const e = await driveError(
        clock,
        policy({ clock }).execute(async () => Promise.reject(thrown)),
      );
      expect(e).toBe(thrown);
      if (thrown instanceof Error) expect(e).toBeInstanceOf(thrown.constructor);
      expectNoCanary(e);
    },
  );

  it("masks without changing objects shared with a client (a request config is copied)", async () => {
    const clock = new VirtualClock();
    const sharedConfig = { headers: { Authorization: CANARIES[1] } };
    const thrown = Object.assign(new Error("HTTP 400"), { status: 400, config: sharedConfig });
    const e = await driveError(
      clock,
      policy({ clock }).execute(async () => Promise.reject(thrown)),
    );
    expectNoCanary(e);
    expect(sharedConfig.headers.Authorization).toBe(CANARIES[1]); // the client's own is intact
  });

  it("a run's journal, a tool's envelope and ToolError, and a ledger's hook errors carry no secret", async () => {
    const clock = new VirtualClock();
    const journal = new MemoryJournal();
    const run = new Run({ clock, journal, id: "r1" });
    await run.step("s", () => Promise.reject(new Error(`step failed: ${KEY}`))).catch(() => {});
    expect(JSON.stringify(journal.steps("r1"))).not.toContain(CANARIES[0]);

    const fail = () => Promise.reject(Object.assign(new Error(`denied ${KEY}`), { status: 403 }));
    const tool = guardTool(fail, { name: "t", effect: "read", policy: { clock } });
    expect(JSON.stringify(await tool({}))).not.toContain(CANARIES[0]);
    const throwing = guardTool(fail, {
      name: "t2",
      effect: "read",
      errors: "throw",
      policy: { clock },
    });
    const te = await throwing({}).catch((x: unknown) => x);
    expect(te).toBeInstanceOf(ToolError);
    expectNoCanary(te);

    const p = policy({
      clock,
      onGiveUp: () => {
        throw new Error(`hook saw ${KEY}`);
      },
    });
    const e = await driveError(
      clock,
      p.execute(async () => Promise.reject(Object.assign(new Error("x"), { status: 400 }))),
    );
    expect(JSON.stringify(ledgerOf(e))).not.toContain(CANARIES[0]);
  });
});
