import { durableAgents } from "./fixtures/durable-agents.ts";

// Long tier: durable agent loops with the journal on Postgres, killed with SIGKILL at 20 random
// points and resumed each time: some 30 process starts and kills per loop, half a minute each.
durableAgents("Postgres", 20);
