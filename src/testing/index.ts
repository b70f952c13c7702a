export { VirtualClock } from "../core/clock.ts";
export { countTokens, FakeModel, type FakeResult, type FakeStep } from "./fake-model.ts";
export { FakeStream, type StreamStep } from "./fake-stream.ts";
