import { durableAgents } from "./fixtures/durable-agents.ts";

// Durable agent loops with the journal on a real PostgreSQL (test/run/fixtures/durable-agents.ts).
durableAgents("Postgres");
