/**
 * Testing: a virtual clock, fake models and streams, and the fault server, an LLM
 * provider on loopback that the official SDKs talk to and that fails on script.
 *
 * @example
 * ```ts
 * import OpenAI from "openai";
 * import { withBreakwater } from "breakwater/openai";
 * import { startFaultServer } from "breakwater/testing";
 *
 * const server = await startFaultServer({ script: { rules: [{ requests: [1, 1], status: 503 }] } });
 * const client = withBreakwater(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "test" }));
 * await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hi" }] });
 * console.log(server.stats().requests); // 2: the 503, then the retry that answered
 * await server.close();
 * ```
 * @module breakwater/testing
 */
export { VirtualClock, type VirtualClockOptions } from "../index.ts";
export { countTokens, FakeModel, type FakeResult, type FakeStep } from "./fake-model.ts";
export { FakeStream, type StreamStep } from "./fake-stream.ts";
export type {
  Capacity,
  ErrorName,
  FaultRule,
  FaultScript,
  Route,
  StreamFault,
} from "./fault-server/script.ts";
export { parseScript } from "./fault-server/script.ts";
export {
  type FaultServer,
  type FaultServerOptions,
  startFaultServer,
} from "./fault-server/server.ts";
export type { Arrival, FaultStats, ToolStats } from "./fault-server/stats.ts";
export { mulberry32 } from "./random.ts";
