/**
 * The internal entry: what breakwater's own integrations (the adapters, the fleet, the
 * telemetry, the fault server, the storm and the command) share beyond the public API, and
 * users have no reason to call: the option tables, the one clock test, header reading and
 * the tagging of a provider's error with its call's outcome. Not a package export.
 */

export { agentRetries, OWNED_POLICY } from "./audit/frameworks.ts";
export { isClock } from "./core/clock.ts";
export { EFFECTS } from "./core/effects.ts";
export { markReason, tagError, waitOf } from "./core/errors.ts";
export { readHeader } from "./core/headers.ts";
export { LAYER, type LayerMark, layerMark, markLayer } from "./core/layer-mark.ts";
export { LIMITS, needOf, spentOf } from "./core/limiter.ts";
export {
  type Checker,
  checker,
  checkOptions,
  opt,
  type Parsed,
  parseOptions,
  type Rule,
  type Spec,
  Validator,
} from "./core/validate.ts";
export { ambientAttempt, type OuterAttempt, wantAmbient } from "./policy/ambient.ts";
export { CALL_SPEC } from "./policy/call.ts";
export { stepContext } from "./policy/durable-step.ts";
export { CHECKED } from "./policy/execute.ts";
export { POLICY_OPTIONS } from "./policy/options.ts";
export { streamBehind } from "./policy/stream.ts";
export { CUTS_READS, PULL, type Pull, type Pullable, pullable } from "./policy/stream-head.ts";
export { SHOWN } from "./policy/stream-options.ts";
export type { CallSlot } from "./run/calls.ts";
export { journaled } from "./run/internal.ts";
export { digestOf, type RequestKey, unstampedJson } from "./run/request-key.ts";
