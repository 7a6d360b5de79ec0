// The string a warm start's saved states are keyed by (server/engine/warm-start.ts): what a state depends on.
import { describe, expect, it } from "vitest";
import { warmStartIdentity } from "../../server/engine/warm-start.js";

describe("warmStartIdentity", () => {
  const id = (gpu: Parameters<typeof warmStartIdentity>[2], kv = "f16", version = "3.22.1") => warmStartIdentity("MODEL", version, gpu, kv);

  it("is the string states were saved under before addon builds existed", () => {
    expect(id({ backend: "cpu", build: "prebuilt" })).toBe("MODEL|node-llama-cpp 3.22.1|cpu|prebuilt|kv f16");
    expect(id({ backend: "cpu", build: "local", localBuild: "full" })).toBe("MODEL|node-llama-cpp 3.22.1|cpu|local|kv f16");
    expect(id({ backend: "cuda" })).toBe("MODEL|node-llama-cpp 3.22.1|cuda|prebuilt|kv f16");
  });

  it("keys our addon alone on the prebuilt libraries as those libraries, not as the full build", () => {
    for (const backend of ["cpu", "cuda", "vulkan"] as const) {
      expect(id({ backend, build: "local", localBuild: "addon" })).toBe(id({ backend, build: "prebuilt" }));
      expect(id({ backend, build: "local", localBuild: "addon" })).not.toBe(id({ backend, build: "local", localBuild: "full" }));
    }
  });

  it("changes with the model, node-llama-cpp, the backend and the KV cache's type", () => {
    const base = id({ backend: "cpu", build: "prebuilt" });
    expect(warmStartIdentity("OTHER", "3.22.1", { backend: "cpu", build: "prebuilt" }, "f16")).not.toBe(base);
    expect(id({ backend: "cpu", build: "prebuilt" }, "f16", "3.23.0")).not.toBe(base);
    expect(id({ backend: "vulkan", build: "prebuilt" })).not.toBe(base);
    expect(id({ backend: "cpu", build: "prebuilt" }, "q8_0")).not.toBe(base);
  });
});
