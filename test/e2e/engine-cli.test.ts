// `svc engine` as users run it, without building (the build itself: test/engine-build, `npm run
// test:engine-build`): what it reports, what it says when the build tools are missing, wrong usage.
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { findEngineBuilds } from "../../server/engine/engine-build.js";
import { runSvc } from "../support/svc-process.js";

describe("svc engine", () => {
  it("says which llama.cpp binaries the server runs on the CPU", async () => {
    const status = runSvc(["engine"]);
    expect(status.status).toBe(0);
    const builds = await findEngineBuilds();
    if (builds.length === 0) expect(status.stdout).toContain("CPU: node-llama-cpp's prebuilt llama.cpp binaries");
    for (const b of builds) expect(status.stdout).toContain(`CPU: llama.cpp built on this machine (${b.release}): ${b.folder}`);
    expect(runSvc(["engine", "status"]).stdout).toBe(status.stdout);
  });

  it("refuses to build without cmake and a compiler, naming what to install, and changes nothing", async () => {
    const before = await findEngineBuilds();
    // A PATH with node and nothing else.
    const bin = mkdtempSync(join(tmpdir(), "svc-path-"));
    symlinkSync(process.execPath, join(bin, "node"));
    const build = runSvc(["engine", "build"], { PATH: bin });
    expect(build.status).toBe(1);
    expect(build.stderr).toContain("the build needs cmake, a C++ compiler (g++ or clang++), make, git");
    expect(build.stderr).toContain("sudo apt-get install cmake build-essential git");
    expect(await findEngineBuilds()).toEqual(before);
  });

  it("explains wrong usage with exit 2 and prints its help", () => {
    const bad = runSvc(["engine", "explode"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("Unknown engine command 'explode'. Use status, build or remove.");
    const extra = runSvc(["engine", "build", "now"]);
    expect(extra.status).toBe(2);
    expect(extra.stderr).toContain("Unexpected argument 'now'");
    const help = runSvc(["engine", "--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("svc engine [status] | svc engine build | svc engine remove");
    expect(help.stdout).toContain("sudo apt-get install cmake build-essential git");
    expect(runSvc(["--help"]).stdout).toContain("svc engine [status] | svc engine build | svc engine remove");
  });
});
