import { durableAgents } from "./fixtures/durable-agents.ts";

// Durable agent loops with the journal on SQLite (test/run/fixtures/durable-agents.ts), killed
// once; at 20 points in the long tier (durable-agent.sqlite.long.test.ts).
durableAgents("SQLite", 1);
