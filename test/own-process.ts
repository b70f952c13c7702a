/**
 * Test files that set what a process holds for everyone: a module mock, OpenTelemetry's
 * global providers, undici's global dispatcher, the Agents SDK's tracing switch. The other
 * files share their worker processes one after another (vitest.config.ts); these each run in
 * a process of their own. `test/architecture.test.ts` checks that every file doing so is here.
 */
export const OWN_PROCESS = [
  "test/compat/undici-v7.test.ts",
  "test/gateway/otel.test.ts",
  "test/otel/otel.test.ts",
  "test/providers/streams.test.ts",
  "test/providers/openai-agents.test.ts",
  "test/storm/peers-2026.test.ts",
];

/** What sets process-wide state, as a test file would write it. */
export const PROCESS_WIDE =
  /\bvi\.(?:mock|doMock|stubGlobal)\(|\bsetGlobal[A-Z]\w*\(|\bsetTracingDisabled\(/;

/** The long tier's files (`npm run test:long`): proofs that need many repetitions or a fresh
 * install. Each says in its header why it is long. */
export const LONG = "test/**/*.long.test.ts";
