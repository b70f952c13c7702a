export { VirtualClock } from "../index.ts";
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
