import { goalsFor } from "./goals.ts";

// Seeds 3 and 4; 1, 2 and 5 run in goals-1 and goals-3, each file in a process of its own.
goalsFor([3, 4]);
