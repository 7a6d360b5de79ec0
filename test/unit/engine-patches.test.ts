// Our patches to node-llama-cpp's addon and the llama.cpp it ships (resources/engine-patches/), compiled in by `svc engine build`: they
// apply to the node-llama-cpp installed here, and the build puts its source back as it was afterwards. The
// build itself, and what the patch does at run time, are in test/engine-build/engine-build.test.ts.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import {
  ADDON_PATCHES,
  applyAddonPatches,
  ENGINE_BUILD_OPTIONS,
  engineBuildHint,
  engineBuildKind,
  enginePatchesDirectory,
  llamaCppSourceDirectory,
  nodeLlamaCppDirectory,
  patchedFiles,
} from "../../server/engine/engine-build.js";
import { llamaCppBundleFile, removeLlamaCppBundleClone } from "../support/llama-cpp-bundle.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
afterAll(removeLlamaCppBundleClone);

/**
 * A copy of the node-llama-cpp source the patches change, laid out as in its package: its addon's files, and
 * llama.cpp's from the bundle it ships (what its build unpacks to llama/llama.cpp; a fresh install has only the bundle).
 */
function addonCopy(): { dir: string; files: string[] } {
  const llamaCpp = `${relative(nodeLlamaCppDirectory(), llamaCppSourceDirectory())}/`;
  const dir = mkdtempSync(join(tmpdir(), "svc-patch-"));
  dirs.push(dir);
  const files = ADDON_PATCHES.flatMap((name) => patchedFiles(readFileSync(join(enginePatchesDirectory(), `${name}.patch`), "utf8")));
  for (const file of files) {
    mkdirSync(join(dir, file, ".."), { recursive: true });
    if (file.startsWith(llamaCpp)) writeFileSync(join(dir, file), llamaCppBundleFile(file.slice(llamaCpp.length)));
    else cpSync(join(nodeLlamaCppDirectory(), file), join(dir, file));
  }
  return { dir, files };
}

describe("node-llama-cpp addon patches", () => {
  it("name the files they change", () => {
    expect(ADDON_PATCHES).toEqual(["persistent-threadpool", "solo-loop-2", "step-sampling", "sgemm-few-columns"]);
    const filesOf = (name: string) => patchedFiles(readFileSync(join(enginePatchesDirectory(), `${name}.patch`), "utf8")).sort();
    for (const name of ["persistent-threadpool", "solo-loop-2", "step-sampling"])
      expect(filesOf(name)).toEqual(["llama/addon/AddonContext.cpp", "llama/addon/AddonContext.h"]);
    expect(filesOf("sgemm-few-columns")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp"]);
  });

  it("apply to the installed node-llama-cpp, and the source is put back byte for byte afterwards", () => {
    const { dir, files } = addonCopy();
    const before = files.map((f) => readFileSync(join(dir, f)));
    const restore = applyAddonPatches(dir);
    const cpp = readFileSync(join(dir, "llama/addon/AddonContext.cpp"), "utf8");
    expect(cpp).toContain("void AddonContext::ensureThreadpool()");
    expect(cpp).toContain("llama_attach_threadpool(ctx, threadpool, threadpool);");
    expect(readFileSync(join(dir, "llama/addon/AddonContext.h"), "utf8")).toContain("ggml_threadpool* threadpool = nullptr;");
    // Its workers sleep between decodes unless SVC_GGML_POLL says otherwise.
    expect(cpp).toContain("params.poll = 0;");
    // solo-loop-2.patch, applied after it: the binding's runSolo, soloAsk and soloStop.
    expect(cpp).toContain('InstanceMethod("runSolo", &AddonContext::RunSolo),');
    expect(cpp).toContain("void AddonContext::stopSoloAndWait()");
    // ...whose runs post their tokens to JavaScript several at a time.
    expect(cpp).toContain("std::chrono::milliseconds(deliverMs)");
    // step-sampling.patch, applied last: a step's decode and its samplings in one job.
    expect(cpp).toContain('InstanceMethod("decodeBatchAndSample", &AddonContext::DecodeBatchAndSample),');
    expect(cpp).toContain("class AddonContextDecodeAndSampleWorker");
    // sgemm-few-columns.patch: llama.cpp's matrix code for F32/F16/BF16 weights (tinyBLAS) and for Q8_0,
    // Q4_0, Q5_0 and IQ4_NL (tinyBLAS_Q0_AVX) takes 2 to 6 columns (a step of a few sequences) one weight
    // row at a time, on x86.
    const sgemm = readFileSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp"), "utf8");
    expect(sgemm).toContain("case 4: gemv<4>(m); return true;");
    expect(sgemm).toContain("case 4: gemv<4>(m); return;");
    expect(sgemm.split("NOINLINE void gemv(int64_t m) {").length).toBe(3);
    // patch(1) leaves no .orig or .rej files behind in node-llama-cpp's folder.
    expect(readdirSync(join(dir, "llama/addon")).sort()).toEqual(["AddonContext.cpp", "AddonContext.h"]);
    expect(readdirSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/llamafile"))).toEqual(["sgemm.cpp"]);
    restore();
    files.forEach((f, i) => expect(readFileSync(join(dir, f)).equals(before[i]!)).toBe(true));
  });

  it("a patch that does not apply fails the build with its name, and leaves the source as it was", () => {
    const { dir, files } = addonCopy();
    const patches = mkdtempSync(join(tmpdir(), "svc-patches-"));
    dirs.push(patches);
    const good = readFileSync(join(enginePatchesDirectory(), "persistent-threadpool.patch"), "utf8");
    // The first file's hunks apply, the second's context is another version's.
    writeFileSync(join(patches, "persistent-threadpool.patch"), good.replace("        llama_context* ctx = nullptr;", "        llama_context* context = nullptr;"));
    const before = files.map((f) => readFileSync(join(dir, f)));
    expect(() => applyAddonPatches(dir, patches)).toThrow(/the patch persistent-threadpool\.patch does not apply to node-llama-cpp/);
    files.forEach((f, i) => expect(readFileSync(join(dir, f)).equals(before[i]!)).toBe(true));
  });

  it("builds are told apart by the patches compiled in", () => {
    expect(ENGINE_BUILD_OPTIONS.SVC_ADDON_PATCHES).toBe("persistent-threadpool,solo-loop-2,step-sampling,sgemm-few-columns");
    expect(engineBuildKind({ ...ENGINE_BUILD_OPTIONS })).toBe("current");
    const { SVC_ADDON_PATCHES: _p, ...earlier } = ENGINE_BUILD_OPTIONS;
    expect(engineBuildKind(earlier)).toBe("earlier");
    expect(engineBuildKind({ ...earlier, SVC_ADDON_PATCHES: "something-else" })).toBe("earlier");
    // A build with the first patch only (an earlier svc's) is an earlier build too.
    expect(engineBuildKind({ ...earlier, SVC_ADDON_PATCHES: "persistent-threadpool" })).toBe("earlier");
    // So is the previous svc's, whose solo runs post each token alone (and take another binding API).
    expect(engineBuildKind({ ...earlier, SVC_ADDON_PATCHES: "persistent-threadpool,solo-loop" })).toBe("earlier");
    // And the one before this, without the samplings in the decode's job.
    expect(engineBuildKind({ ...earlier, SVC_ADDON_PATCHES: "persistent-threadpool,solo-loop-2" })).toBe("earlier");
    // And the last one, with llama.cpp's matrix code as it ships.
    expect(engineBuildKind({ ...earlier, SVC_ADDON_PATCHES: "persistent-threadpool,solo-loop-2,step-sampling" })).toBe("earlier");
    expect(engineBuildKind({ ...earlier, GGML_NATIVE: "ON" })).toBeNull();
    expect(engineBuildKind({})).toBeNull();
    expect(engineBuildKind(undefined)).toBeNull();
  });

  it("the server suggests a build only on Linux, on the CPU, with the prebuilt binaries", () => {
    const hint = engineBuildHint({ backend: "cpu", build: "prebuilt" }, "linux");
    expect(hint).toMatch(/^The CPU runs node-llama-cpp's prebuilt llama.cpp binaries\. `svc engine build` compiles them on this machine/);
    expect(hint).toContain("needs cmake, make, git, patch and a C++ compiler");
    expect(engineBuildHint({ backend: "cpu", build: "local" }, "linux")).toBeNull();
    expect(engineBuildHint({ backend: "cuda", build: "prebuilt" }, "linux")).toBeNull();
    expect(engineBuildHint({ backend: "cpu", build: "prebuilt" }, "darwin")).toBeNull();
    expect(engineBuildHint({ backend: "cpu", build: "prebuilt" }, "win32")).toBeNull();
  });
});
