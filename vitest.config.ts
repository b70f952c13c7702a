import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    pool: "forks",
    // Both cores: the storm's goal tests are CPU-bound and independent of the rest.
    maxWorkers: 2,
    // Leak tests collect garbage on purpose (abandoned streams, bounded ledgers).
    execArgv: ["--expose-gc"],
  },
});
