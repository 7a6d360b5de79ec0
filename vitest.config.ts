import { defineConfig } from "vitest/config";

// The test workers (forks of this process) run libuv's pool with one thread, as `svc serve` and the engine
// process do (bin/libuv-pool.js), so the slot loop takes the paths users get (TokenPaths.queuedSamplings).
if ((process.env.UV_THREADPOOL_SIZE ?? "").trim() === "") process.env.UV_THREADPOOL_SIZE = "1";

export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts", "test/contract/**/*.test.ts", "test/e2e/**/*.test.ts", "test/reliability/**/*.test.ts", "test/ui/**/*.test.ts", "test/electron/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/cleanup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two cores: the e2e files each run a server with the model; more workers only contend.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
