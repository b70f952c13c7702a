import { goalsFor } from "./goals.ts";

// Seeds 4 and 5; 1 to 3 run in goals-1.test.ts, in a process of their own.
goalsFor([4, 5]);
