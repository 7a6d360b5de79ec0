import { defineConfig } from "vitest/config";

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
