import { goalsFor } from "./goals.ts";

// One seed per file, each in a process of its own (the storm for a seed is a minute of CPU).
goalsFor([2]);
