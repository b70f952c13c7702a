import { goalsFor } from "./goals.ts";

// Seeds 1 and 2; 3 to 5 run in goals-2 and goals-3, each file in a process of its own.
goalsFor([1, 2]);
