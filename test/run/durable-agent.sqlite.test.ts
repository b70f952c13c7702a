import { durableAgents } from "./fixtures/durable-agents.ts";

// Durable agent loops with the journal on SQLite (test/run/fixtures/durable-agents.ts).
durableAgents("SQLite");
