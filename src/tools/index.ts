export { argsDigest, canonicalJson } from "./canonical.ts";
export {
  type ToolAction,
  ToolArgumentError,
  ToolError,
  type ToolErrorEnvelope,
} from "./envelope.ts";
export {
  type Effect,
  type GuardedCallOptions,
  type GuardedTool,
  type GuardToolSpec,
  guardTool,
  type ResultVerdict,
  readEnvelope,
  type ToolCallContext,
} from "./guard-tool.ts";
