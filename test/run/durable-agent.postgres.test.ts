import { durableAgents } from "./fixtures/durable-agents.ts";

// Durable agent loops with the journal on Postgres (test/run/fixtures/durable-agents.ts), killed
// once; at 20 points in the long tier (durable-agent.postgres.long.test.ts).
durableAgents("Postgres", 1);
