import { goalsFor } from "./goals.ts";

// Seed 5; 1 to 4 run in goals-1 and goals-2, each file in a process of its own.
goalsFor([5]);
