import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Most files wait on real time (daemons, Redis, timers, sockets), not on the CPU: vitest's
    // default of one worker fewer than the cores ran them one at a time on a 2-core machine.
    maxWorkers: Math.max(4, availableParallelism() - 1),
  },
});
