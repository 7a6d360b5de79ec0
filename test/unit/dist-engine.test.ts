// scripts/dist-engine.mjs: what `npm run dist` packs for the CPU on each platform, and when it builds first.
import { describe, expect, it } from "vitest";

interface Build {
  folder: string;
  current: boolean;
  building: boolean;
  backend?: "cpu" | "cuda" | "vulkan";
  addonOnly?: boolean;
}
type Step = { action: "pack" | "build" | "skip" | "fail"; message: string };
// A path in a variable: the script is plain JavaScript, imported at run time without type declarations.
const script = "../../scripts/dist-engine.mjs";
const { distEngineStep } = (await import(script)) as { distEngineStep: (o: { platform: string; setting?: string; builds: Build[] }) => Step };

const current: Build = { folder: "/x/localBuilds/linux-x64-new", current: true, building: false };
const earlier: Build = { folder: "/x/localBuilds/linux-x64-old", current: false, building: false };

describe("npm run dist's engine step", () => {
  it("packs the prebuilt binaries on macOS and Windows", () => {
    for (const platform of ["darwin", "win32"]) {
      const step = distEngineStep({ platform, builds: [] });
      expect(step.action).toBe("skip");
      expect(step.message).toContain("prebuilt");
    }
  });

  it("on Linux builds the engine first where there is no current build, and packs one that exists", () => {
    expect(distEngineStep({ platform: "linux", builds: [] }).action).toBe("build");
    expect(distEngineStep({ platform: "linux", builds: [earlier] }).action).toBe("build");
    expect(distEngineStep({ platform: "linux", builds: [{ ...current, building: true }] }).action).toBe("build");
    const step = distEngineStep({ platform: "linux", setting: "build", builds: [current] });
    expect(step).toEqual({ action: "pack", message: `Packing the llama.cpp built by svc engine build: ${current.folder}.` });
  });

  it("says when an earlier build would be packed beside the current one", () => {
    const step = distEngineStep({ platform: "linux", builds: [earlier, current] });
    expect(step.action).toBe("pack");
    expect(step.message).toContain(earlier.folder);
    expect(step.message).toContain("svc engine remove");
  });

  it("packs the CPU's full build only: an addon build (a GPU backend's, or the CPU's --addon-only) is not it, and is named", () => {
    const vulkan: Build = { folder: "/x/localBuilds/linux-x64-vulkan-addon", current: true, building: false, backend: "vulkan", addonOnly: true };
    const cpuAddon: Build = { folder: "/x/localBuilds/linux-x64-addon", current: true, building: false, backend: "cpu", addonOnly: true };
    const alone = distEngineStep({ platform: "linux", builds: [vulkan, cpuAddon] });
    expect(alone.action).toBe("build");
    const step = distEngineStep({ platform: "linux", builds: [vulkan, { ...current, backend: "cpu", addonOnly: false }] });
    expect(step.action).toBe("pack");
    expect(step.message).toContain(`Packing the llama.cpp built by svc engine build: ${current.folder}.`);
    expect(step.message).toContain(`An addon build would be packed beside it (${vulkan.folder}), with links into this machine's node_modules`);
  });

  it("packs the prebuilt binaries on Linux with SVC_DIST_ENGINE=prebuilt, and refuses another value", () => {
    expect(distEngineStep({ platform: "linux", setting: "prebuilt", builds: [] }).action).toBe("skip");
    const bad = distEngineStep({ platform: "linux", setting: "fast", builds: [current] });
    expect(bad.action).toBe("fail");
    expect(bad.message).toContain("'fast'");
  });
});
