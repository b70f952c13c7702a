import { dbosHarness } from "./fixtures/dbos-harness.ts";

// Long tier: the agent loop on DBOS and a real Postgres, its worker killed with SIGKILL at 20
// random points and recovered by DBOS each time (dbos.test.ts kills it once): some 30 process
// starts and workflow recoveries, half a minute.
dbosHarness().killLoop(20);
