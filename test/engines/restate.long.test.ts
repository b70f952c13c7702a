import { restateHarness } from "./fixtures/restate-harness.ts";

// Long tier: the agent loop on the real Restate server, its service process killed with
// SIGKILL at 20 random points and started again each time (restate.test.ts kills it once):
// some 40 process starts and the invocations' recoveries, about a minute.
restateHarness().killLoops(20);
