// `svc engine` as users run it, without building (the build itself: test/engine-build, `npm run
// test:engine-build`): what it reports, what it says when the build tools are missing, wrong usage.
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ENGINE_BASE_OPTIONS, engineAddonBuildOptions, engineBuildOptions, findEngineBuilds, localBuildsDirectory } from "../../server/engine/engine-build.js";
import { runSvc } from "../support/svc-process.js";

describe("svc engine", () => {
  it("says which llama.cpp binaries the server runs on the CPU", async () => {
    const status = runSvc(["engine"]);
    expect(status.status).toBe(0);
    const builds = await findEngineBuilds();
    if (!builds.some((b) => b.current && b.backend === "cpu")) expect(status.stdout).toContain("CPU: node-llama-cpp's prebuilt llama.cpp binaries");
    for (const b of builds.filter((b) => b.current && !b.addonOnly)) expect(status.stdout).toContain(`CPU: llama.cpp built on this machine (${b.release}): ${b.folder}`);
    for (const b of builds.filter((b) => b.current && b.addonOnly))
      expect(status.stdout).toContain(`svc's addon built on this machine for node-llama-cpp's prebuilt llama.cpp (${b.release}): ${b.folder}`);
    expect(runSvc(["engine", "status"]).stdout).toBe(status.stdout);
  });

  it("refuses to build without cmake and a compiler, naming what to install, and changes nothing", async () => {
    const before = await findEngineBuilds();
    // A PATH with node and nothing else.
    const bin = mkdtempSync(join(tmpdir(), "svc-path-"));
    symlinkSync(process.execPath, join(bin, "node"));
    const build = runSvc(["engine", "build"], { PATH: bin });
    rmSync(bin, { recursive: true, force: true });
    expect(build.status).toBe(1);
    expect(build.stderr).toContain("the build needs cmake, a C++ compiler (g++ or clang++), make, git");
    expect(build.stderr).toContain("sudo apt-get install cmake build-essential git");
    expect(await findEngineBuilds()).toEqual(before);
  });

  it("while a build is being made, says so, and remove refuses", async () => {
    // A build folder as node-llama-cpp leaves it mid-build: last build's metadata, its lock held (fresh).
    const folder = join(localBuildsDirectory(), "linux-x64-svc-test-building");
    const hadBuildsFolder = existsSync(localBuildsDirectory());
    mkdirSync(join(folder, "Release"), { recursive: true });
    try {
      writeFileSync(
        join(folder, "Release", "_nlcBuildMetadata.json"),
        JSON.stringify({ buildOptions: { customCmakeOptions: engineBuildOptions(), gpu: false, llamaCpp: { release: "v0.0.0" } } }),
      );
      mkdirSync(`${folder}.lock`);
      expect(await findEngineBuilds()).toContainEqual({ backend: "cpu", addonOnly: false, folder, release: "v0.0.0", building: true, current: true });
      expect(runSvc(["engine"]).stdout).toContain("(being built again now: a server started meanwhile uses the prebuilt binaries)");
      const remove = runSvc(["engine", "remove"]);
      expect(remove.status).toBe(1);
      expect(remove.stderr).toContain("a build is running (svc engine build); remove it once that has finished.");
    } finally {
      rmSync(folder, { recursive: true, force: true });
      rmSync(`${folder}.lock`, { recursive: true, force: true });
      if (!hadBuildsFolder) rmSync(localBuildsDirectory(), { recursive: true, force: true });
    }
  });

  it("names a build of an earlier svc (from other sources) as not used, and remove removes it", async () => {
    const folder = join(localBuildsDirectory(), "linux-x64-svc-test-earlier");
    const hadBuildsFolder = existsSync(localBuildsDirectory());
    const hadCurrent = (await findEngineBuilds()).some((b) => b.current);
    mkdirSync(join(folder, "Release"), { recursive: true });
    try {
      // An earlier svc's build: named after the patches compiled in, not after a hash of its sources.
      const earlier = { ...ENGINE_BASE_OPTIONS, SVC_ADDON_PATCHES: "persistent-threadpool,solo-loop-2,step-sampling,sgemm-few-columns" };
      writeFileSync(
        join(folder, "Release", "_nlcBuildMetadata.json"),
        JSON.stringify({ buildOptions: { customCmakeOptions: earlier, gpu: false, llamaCpp: { release: "v0.0.0" } } }),
      );
      expect(await findEngineBuilds()).toContainEqual({ backend: "cpu", addonOnly: false, folder, release: "v0.0.0", building: false, current: false });
      const status = runSvc(["engine"]).stdout;
      expect(status).toContain(
        `Not used: ${folder}, built by an earlier svc without its current changes to node-llama-cpp. \`svc engine build\` builds the current one; \`svc engine remove\` removes both.`,
      );
      if (!hadCurrent) expect(status).toContain("CPU: node-llama-cpp's prebuilt llama.cpp binaries.");
      if (hadCurrent) return;
      const remove = runSvc(["engine", "remove"]);
      expect(remove.status).toBe(0);
      expect(remove.stdout).toContain(`Removed ${folder}.`);
      expect(existsSync(folder)).toBe(false);
    } finally {
      rmSync(folder, { recursive: true, force: true });
      if (!hadBuildsFolder) rmSync(localBuildsDirectory(), { recursive: true, force: true });
    }
  });

  it("lists addon builds by backend (current or an earlier svc's), and remove removes them", async () => {
    const hadBuildsFolder = existsSync(localBuildsDirectory());
    const before = await findEngineBuilds();
    // Addon builds as `svc engine build --gpu vulkan` leaves them: node-llama-cpp's metadata of the prebuilt
    // Vulkan binaries with our identity as its CMake options (the libraries and the addon are not read here).
    const current = join(localBuildsDirectory(), "linux-x64-vulkan-svc-test-addon");
    const earlier = join(localBuildsDirectory(), "linux-x64-cuda-svc-test-addon");
    const metadata = (gpu: string, options: Record<string, string>) =>
      JSON.stringify({ buildOptions: { customCmakeOptions: options, platform: "linux", arch: "x64", gpu, llamaCpp: { repo: "ggml-org/llama.cpp", release: "v0.0.1" } } });
    try {
      for (const folder of [current, earlier]) mkdirSync(join(folder, "Release"), { recursive: true });
      writeFileSync(join(current, "Release", "_nlcBuildMetadata.json"), metadata("vulkan", engineAddonBuildOptions("vulkan")));
      writeFileSync(join(earlier, "Release", "_nlcBuildMetadata.json"), metadata("cuda", { SVC_ADDON_BUILD_ID: "0123456789abcdef" }));
      const builds = await findEngineBuilds();
      expect(builds).toContainEqual({ backend: "vulkan", addonOnly: true, folder: current, release: "v0.0.1", building: false, current: true });
      expect(builds).toContainEqual({ backend: "cuda", addonOnly: true, folder: earlier, release: "v0.0.1", building: false, current: false });
      const status = runSvc(["engine"]).stdout;
      expect(status).toContain(`Vulkan: svc's addon built on this machine for node-llama-cpp's prebuilt llama.cpp (v0.0.1): ${current}`);
      expect(status).toContain(`Not used: ${earlier}, built by an earlier svc`);
      // A GPU's build says nothing about the CPU's binaries.
      if (!before.some((b) => b.backend === "cpu" && b.current)) expect(status).toContain("CPU: node-llama-cpp's prebuilt llama.cpp binaries.");
      if (before.length > 0) return;
      const remove = runSvc(["engine", "remove"]);
      expect(remove.status).toBe(0);
      expect(remove.stdout).toContain(`Removed ${current}.`);
      expect(remove.stdout).toContain(`Removed ${earlier}.`);
      expect(existsSync(current) || existsSync(earlier)).toBe(false);
    } finally {
      rmSync(current, { recursive: true, force: true });
      rmSync(earlier, { recursive: true, force: true });
      if (!hadBuildsFolder) rmSync(localBuildsDirectory(), { recursive: true, force: true });
    }
  });

  it("explains wrong usage with exit 2 and prints its help", () => {
    const bad = runSvc(["engine", "explode"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("Unknown engine command 'explode'. Use status, build, remove or warm-start.");
    const extra = runSvc(["engine", "build", "now"]);
    expect(extra.status).toBe(2);
    expect(extra.stderr).toContain("Unexpected argument 'now' for svc engine build.");
    const gpu = runSvc(["engine", "build", "--gpu", "metal"]);
    expect(gpu.status).toBe(2);
    expect(gpu.stderr).toContain("svc engine build --gpu takes auto, cpu, cuda or vulkan, not 'metal'.");
    expect(runSvc(["engine", "status", "--gpu", "cpu"]).status).toBe(2);
    const help = runSvc(["engine", "--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("svc engine [status] | svc engine build | svc engine remove");
    expect(help.stdout).toContain("sudo apt-get install cmake build-essential git");
    expect(help.stdout).toContain("svc engine warm-start [list | clear] [--data-dir DIR]");
    expect(runSvc(["--help"]).stdout).toContain("svc engine [status] | svc engine build | svc engine remove");
    const badWarm = runSvc(["engine", "warm-start", "melt"]);
    expect(badWarm.status).toBe(2);
    expect(badWarm.stderr).toContain("Unknown warm-start command 'melt'. Use list or clear.");
  });
});
