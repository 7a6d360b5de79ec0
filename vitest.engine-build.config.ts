// `npm run test:engine-build`: the real `svc engine build` (minutes of compiling), alone, after `npm test`
// (CI runs both). Alone because a server started by another test while the build exists would run on it.
import { defineConfig } from "vitest/config";
import { createRequire } from "node:module";

const { useOnePoolThread } = createRequire(import.meta.url)("./bin/libuv-pool.js") as { useOnePoolThread(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): boolean };

// The test workers (forks of this process) run libuv's pool with one thread, as `svc serve` and the engine
// process do, by the same rule (bin/libuv-pool.js), so the slot loop takes the paths users get
// (TokenPaths.queuedSamplings).
useOnePoolThread(process.env, process.platform);

export default defineConfig({
  test: {
    include: ["test/engine-build/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/cleanup.ts"],
    testTimeout: 30 * 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: 1,
    reporters: ["default"],
  },
});
