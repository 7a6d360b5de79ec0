import { defineConfig } from "vitest/config";
import { createRequire } from "node:module";

const { useOnePoolThread } = createRequire(import.meta.url)("./bin/libuv-pool.js") as { useOnePoolThread(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): boolean };

// The test workers (forks of this process) run libuv's pool with one thread, as `svc serve` and the engine
// process do, by the same rule (bin/libuv-pool.js), so the slot loop takes the paths users get
// (TokenPaths.queuedSamplings).
useOnePoolThread(process.env, process.platform);

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
