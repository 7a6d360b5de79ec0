// `npm run test:engine-build`: the real `svc engine build` (minutes of compiling), alone, after `npm test`
// (CI runs both). Alone because a server started by another test while the build exists would run on it.
import { defineConfig } from "vitest/config";

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
