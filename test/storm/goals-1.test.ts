import { goalsFor } from "./goals.ts";

// The storm's goals on seed 1 (the storm for a seed is half a minute of CPU); seeds 2-5 are
// the long tier's (goals-2.long.test.ts ...).
goalsFor([1]);
