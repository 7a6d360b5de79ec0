// Our C++ in node-llama-cpp's addon (resources/engine-native/) and the patches that hook it in and change the
// llama.cpp it ships (resources/engine-patches/), compiled in by `svc engine build`: they apply to the
// node-llama-cpp installed here (the version package.json pins), the build puts its source back as it was
// afterwards, and a build is named by a hash of all of it. The build itself, and what the code does at run
// time, are in test/engine-build/engine-build.test.ts.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import {
  ADDON_PATCHES,
  applyAddonPatches,
  ENGINE_BASE_OPTIONS,
  engineAddonBuildId,
  engineAddonBuildOptions,
  engineAddonProjectDirectory,
  ENGINE_BUILD_HINT_IN_WINDOW,
  engineBuildHint,
  engineBuildHintInWindow,
  engineBuildId,
  engineBuildKind,
  engineBuildOptions,
  engineBuildStore,
  engineNativeDirectory,
  enginePatchesDirectory,
  llamaCppSourceDirectory,
  nativeSourceFiles,
  nodeLlamaCppDirectory,
  patchedFiles,
} from "../../server/engine/engine-build.js";
import { llamaCppBundleFile, removeLlamaCppBundleClone } from "../support/llama-cpp-bundle.js";
import { localBuildFolderName, prebuiltBinaries, probeLlama } from "../../server/engine/engine-addon-build.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
afterAll(removeLlamaCppBundleClone);

/**
 * Copies of what a build's identity is read from (our C++, the patches, the addon's CMake project, node-llama-cpp's
 * version and llama.cpp release), in temporary folders, to change one at a time.
 */
function identityInputs(): { native: string; patches: string; project: string; nodeLlamaCpp: string } {
  const copy = (from: string) => {
    const to = mkdtempSync(join(tmpdir(), "svc-id-"));
    dirs.push(to);
    cpSync(from, to, { recursive: true });
    return to;
  };
  const nodeLlamaCpp = mkdtempSync(join(tmpdir(), "svc-nlc-"));
  dirs.push(nodeLlamaCpp);
  mkdirSync(join(nodeLlamaCpp, "llama"));
  cpSync(join(nodeLlamaCppDirectory(), "package.json"), join(nodeLlamaCpp, "package.json"));
  cpSync(join(nodeLlamaCppDirectory(), "llama", "binariesGithubRelease.json"), join(nodeLlamaCpp, "llama", "binariesGithubRelease.json"));
  return { native: copy(engineNativeDirectory()), patches: copy(enginePatchesDirectory()), project: copy(engineAddonProjectDirectory()), nodeLlamaCpp };
}

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
  it("name the files they change; our code is in files of our own", () => {
    expect(ADDON_PATCHES).toEqual(["addon-hooks", "sgemm-few-columns", "sgemm-q6k-cols", "amx-tile-config", "flash-attn-few-queries", "repack-gemv-order", "repack-q4k-vnni", "repack-lone-column-split", "mul-mat-lone-column-split"]);
    const filesOf = (name: string) => patchedFiles(readFileSync(join(enginePatchesDirectory(), `${name}.patch`), "utf8")).sort();
    expect(filesOf("addon-hooks")).toEqual(["llama/addon/AddonContext.cpp", "llama/addon/AddonContext.h"]);
    expect(filesOf("sgemm-few-columns")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp"]);
    expect(filesOf("sgemm-q6k-cols")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp"]);
    expect(filesOf("amx-tile-config")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp"]);
    expect(filesOf("flash-attn-few-queries")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/ops.cpp"]);
    expect(filesOf("repack-gemv-order")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/arch/x86/repack.cpp"]);
    expect(filesOf("repack-q4k-vnni")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/arch/x86/repack.cpp"]);
    expect(filesOf("repack-lone-column-split")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/repack.cpp"]);
    expect(filesOf("mul-mat-lone-column-split")).toEqual(["llama/llama.cpp/ggml/src/ggml-cpu/ggml-cpu.c"]);
    expect(nativeSourceFiles()).toEqual(["context-job.h", "draft-rounds.cpp", "q4k-vnni.h", "q6k-cols.h", "solo-loop.cpp", "step-sampling.cpp", "svc-context.h", "threadpool.cpp"]);
    // The hooks are declarations and call sites: the addon patch adds no function bodies of its own, nor do the
    // calls of our kernels in llama.cpp's (q4k-vnni.h, q6k-cols.h), which are a few lines each.
    const added = (name: string) =>
      readFileSync(join(enginePatchesDirectory(), `${name}.patch`), "utf8")
        .split("\n")
        .filter((l) => l.startsWith("+") && !l.startsWith("+++"));
    expect(added("addon-hooks").length).toBeLessThanOrEqual(40);
    expect(added("addon-hooks").filter((l) => /\)\s*\{\s*$/.test(l))).toEqual([]);
    // A function's opening line ends in ") {" and is not a loop or a branch (a call site's loop may change).
    const opensFunction = (l: string) => /\)\s*(const\s*)?\{\s*$/.test(l) && !/^\+\s*(\}\s*)?(for|if|while|switch|else)\b/.test(l);
    expect(["+static inline int64_t f(int a) {", "+void g() {"].every(opensFunction)).toBe(true);
    expect(["+        for (int64_t x = x_vnni; x < nc / 8; x++) {", "+    case GGML_TYPE_Q6_K: {"].some(opensFunction)).toBe(false);
    for (const name of ["repack-q4k-vnni", "sgemm-q6k-cols"]) {
      expect(added(name).length).toBeLessThanOrEqual(15);
      expect(added(name).filter(opensFunction)).toEqual([]);
    }
  });

  it("apply to the installed node-llama-cpp with our code beside them, and the source is put back byte for byte afterwards", () => {
    const { dir, files } = addonCopy();
    const before = files.map((f) => readFileSync(join(dir, f)));
    const restore = applyAddonPatches(dir);
    const cpp = readFileSync(join(dir, "llama/addon/AddonContext.cpp"), "utf8");
    const header = readFileSync(join(dir, "llama/addon/AddonContext.h"), "utf8");
    // The hooks: a thread pool for each decode, solo runs stopped and the pool freed when the context goes,
    // the binding's new methods.
    expect(cpp).toContain("ctx->ensureThreadpool(); // svc-desktop (svc/threadpool.cpp)");
    expect(cpp).toContain("stopSoloAndWait(); // svc-desktop (svc/solo-loop.cpp)");
    expect(cpp).toContain("freeThreadpool(); // svc-desktop (svc/threadpool.cpp)");
    for (const method of ["decodeBatchAndSample", "draftRounds", "runSolo", "soloAsk", "soloStop"]) expect(cpp).toContain(`InstanceMethod("${method}", &AddonContext::`);
    expect(header).toContain('#include "svc/svc-context.h"');
    expect(header).toContain("ggml_threadpool* threadpool = nullptr;");
    // Our code, where node-llama-cpp's CMake compiles it (llama/addon/*/*.cpp), defining what the hooks call.
    const native = (f: string) => readFileSync(join(dir, "llama/addon/svc", f), "utf8");
    expect(readdirSync(join(dir, "llama/addon/svc")).sort()).toEqual(nativeSourceFiles());
    expect(native("threadpool.cpp")).toContain("void AddonContext::ensureThreadpool()");
    expect(native("threadpool.cpp")).toContain("llama_attach_threadpool(ctx, threadpool, threadpool);");
    // Its workers sleep between decodes unless SVC_GGML_POLL says otherwise.
    expect(native("threadpool.cpp")).toContain("params.poll = 0;");
    expect(native("threadpool.cpp")).toContain("void AddonContext::freeThreadpool()");
    expect(native("solo-loop.cpp")).toContain("Napi::Value AddonContext::RunSolo(const Napi::CallbackInfo& info)");
    expect(native("solo-loop.cpp")).toContain("void AddonContext::stopSoloAndWait()");
    // ...whose runs post their tokens to JavaScript several at a time.
    expect(native("solo-loop.cpp")).toContain("std::chrono::milliseconds(deliverMs)");
    expect(native("step-sampling.cpp")).toContain("class AddonContextDecodeAndSampleWorker");
    expect(native("step-sampling.cpp")).toContain("Napi::Value AddonContext::DecodeBatchAndSample(const Napi::CallbackInfo& info)");
    expect(native("draft-rounds.cpp")).toContain("Napi::Value AddonContext::DraftRounds(const Napi::CallbackInfo& info)");
    // sgemm-few-columns.patch: llama.cpp's matrix code for F32/F16/BF16 weights (tinyBLAS) and for Q8_0,
    // Q4_0, Q5_0 and IQ4_NL (tinyBLAS_Q0_AVX) takes 1 to 6 columns (a step of one or a few sequences) one
    // weight row at a time, on x86, a lone column too (not llama.cpp's vec_dot, which sums in another order).
    const sgemm = readFileSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp"), "utf8");
    expect(sgemm).toContain("case 4: gemv<4>(m); return true;");
    expect(sgemm).toContain("case 4: gemv<4>(m); return;");
    expect(sgemm).toContain("case 1: gemv<1>(m); return true;");
    expect(sgemm).toContain("case 1: gemv<1>(m); return;");
    expect(sgemm).toContain("#if !defined(__MMA__) && !defined(__AVX__) && !defined(__AVX2__) && !defined(__AVX512F__)\n    if (n < 2)");
    expect(sgemm.split("NOINLINE void gemv(int64_t m) {").length).toBe(3);
    // Both gemvs give each thread one contiguous share of the rows, no shared chunk counter and no barrier of
    // their own: one long stream of weights a thread (docs/performance.md, section 54).
    for (const part of sgemm.split("NOINLINE void gemv(int64_t m) {").slice(1)) {
      const gemv = part.slice(0, part.indexOf("\n    }\n"));
      expect(gemv).toMatch(/const int64_t duty = /);
      expect(gemv).not.toContain("chunk");
      expect(gemv).not.toContain("ggml_barrier");
    }
    // sgemm-q6k-cols.patch: Q6_K weights with Q8_K columns go to our q6k-cols.h (any number of columns, llama.cpp's
    // bits), which sgemm.cpp includes from where the build copies our code.
    expect(sgemm).toContain('#include "../../../../../addon/svc/q6k-cols.h" // svc-desktop');
    const q6k = sgemm.slice(sgemm.indexOf("    case GGML_TYPE_Q6_K: {"), sgemm.indexOf("    case GGML_TYPE_Q5_0: {"));
    expect(q6k).toContain("if (Btype != GGML_TYPE_Q8_K)");
    expect(q6k).toContain("svc_q6_K_cols(params->ith, params->nth, m, n, k, A, lda, B, ldb, (float *)C, ldc);");
    expect(existsSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/llamafile", "../../../../../addon/svc/q6k-cols.h"))).toBe(true);
    expect(native("q6k-cols.h")).toContain("static void svc_q6_K_cols(int ith, int nth, int64_t m, int64_t n, int64_t k,");
    // amx-tile-config.patch: the AMX kernels' tile configuration is a constant, not stores on the stack that
    // GCC 12 drops as dead (then the first tile instruction of a quantized matrix product raises SIGILL).
    const mmq = readFileSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp"), "utf8");
    expect(mmq).toContain("alignas(64) static constexpr tile_config_t tc = [] {");
    expect(mmq).not.toContain("alignas(64) tile_config_t tc = {};");
    expect(mmq.split("_tile_loadconfig(&tc);").length).toBe(2);
    // flash-attn-few-queries.patch: llama.cpp's CPU flash attention takes every sequence's queries below the
    // tiled kernel's 64 (a lone token too, before llama.cpp's split of its keys between threads) over the keys
    // together, one head at a time: the same sums for a token whatever the step holds.
    const ops = readFileSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/ops.cpp"), "utf8");
    expect(ops).toContain("static void ggml_compute_forward_flash_attn_ext_f16_rows(");
    expect(ops).toContain("if (!use_ref && neq1 < (int64_t) ggml_fa_tile_config::Q &&");
    expect(ops.indexOf("ggml_compute_forward_flash_attn_ext_f16_rows(dst, g % neq2, g / neq2);")).toBeLessThan(ops.indexOf("const bool use_split_kv_path"));
    expect(ops.split("ggml_compute_forward_flash_attn_ext_f16_rows(dst, g % neq2, g / neq2);").length).toBe(2);
    // repack-gemv-order.patch: llama.cpp's gemv for a lone column of repacked Q4_K and Q2_K weights adds each sb's
    // sub blocks into its float sums, as the gemm for 4 columns and more does (not a whole super block's integers at once).
    const repack = readFileSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/arch/x86/repack.cpp"), "utf8");
    for (const name of ["ggml_gemv_q4_K_8x8_q8_K", "ggml_gemv_q2_K_8x8_q8_K"]) {
      const start = repack.indexOf(`void ${name}(`);
      const gemv = repack.slice(start, repack.indexOf("\n}\n", start));
      expect(gemv).toContain("acc_row = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_sb), _mm256_mul_ps(col_scale_f32, row_scale_f32), acc_row);");
      expect(gemv).toContain("acc_min_rows = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc_min_sb), _mm256_mul_ps(col_dmin_f32, row_scale_f32), acc_min_rows);");
      expect(gemv).not.toContain("iacc_b");
    }
    // repack-q4k-vnni.patch: the calls of our q4k-vnni.h (vpdpbusd where the CPU has AVX512-VNNI or AVX-VNNI, the
    // same bits as llama.cpp's loops): the gemv takes every block of 8 columns before llama.cpp's loop, which
    // starts where it left off; the gemm every row before llama.cpp's loops (AVX-512 and AVX2), which then find
    // none left but for an odd last block of 8 columns on AVX-512 (its xstart).
    const body = (name: string) => {
      const start = repack.indexOf(`void ${name}(`);
      return repack.slice(start, repack.indexOf("\n}\n", start));
    };
    expect(repack).toContain('#include "../../../../../../addon/svc/q4k-vnni.h" // svc-desktop');
    expect(existsSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/arch/x86", "../../../../../../addon/svc/q4k-vnni.h"))).toBe(true);
    const q4kGemv = body("ggml_gemv_q4_K_8x8_q8_K");
    const gemvCall = q4kGemv.indexOf("const int64_t x_vnni = svc_gemv_q4_K_8x8_vnni(n, s, vx, vy, nr, nc);");
    expect(gemvCall).toBeGreaterThan(0);
    expect(gemvCall).toBeLessThan(q4kGemv.indexOf("for (int64_t x = x_vnni; x < nc / 8; x++) {"));
    const q4kGemm = body("ggml_gemm_q4_K_8x8_q8_K");
    const gemmCall = q4kGemm.indexOf("y = svc_gemm_q4_K_8x8_vnni(n, s, bs, vx, vy, nr, nc);");
    expect(gemmCall).toBeGreaterThan(q4kGemm.indexOf("int64_t y = 0;"));
    expect(gemmCall).toBeLessThan(q4kGemm.indexOf("#if defined(__AVX512BW__) && defined(__AVX512DQ__)"));
    expect(gemmCall).toBeLessThan(q4kGemm.indexOf("for (; y < anr / 4; y += 4) {"));
    // repack-lone-column-split.patch: llama.cpp's products of repacked weights give each thread one contiguous share
    // of the weights for a lone token (four chunks a thread from the shared counter for more).
    const repackCpu = readFileSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/repack.cpp"), "utf8");
    expect(repackCpu).toContain("int     nth_scaled  = ne11 == 1 ? nth : nth * 4;");
    expect(repackCpu.split("nth_scaled  =").length).toBe(2);
    // mul-mat-lone-column-split.patch: and llama.cpp's generic product (types without code of ours) likewise.
    const ggmlCpu = readFileSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/ggml-cpu.c"), "utf8");
    expect(ggmlCpu).toContain("if (nchunk0 * nchunk1 < nth * 4 || ggml_is_numa() || nr1 == 1) {");
    const q4kVnni = native("q4k-vnni.h");
    expect(q4kVnni).toContain("#define SVC_Q4K_VNNI 512");
    expect(q4kVnni).toContain("#define SVC_Q4K_VNNI 256");
    expect(q4kVnni).toContain("_mm512_dpbusd_epi32(");
    expect(q4kVnni).toContain("_mm256_dpbusd_avx_epi32(");
    expect(q4kVnni).toContain("if (nr < 12) gemm_rows(");
    // patch(1) leaves no .orig or .rej files behind in node-llama-cpp's folder.
    expect(readdirSync(join(dir, "llama/addon")).sort()).toEqual(["AddonContext.cpp", "AddonContext.h", "svc"]);
    expect(readdirSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/llamafile"))).toEqual(["sgemm.cpp"]);
    expect(readdirSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/amx"))).toEqual(["mmq.cpp"]);
    expect(readdirSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu")).sort()).toEqual(["amx", "arch", "ggml-cpu.c", "llamafile", "ops.cpp", "repack.cpp"]);
    expect(readdirSync(join(dir, "llama/llama.cpp/ggml/src/ggml-cpu/arch/x86"))).toEqual(["repack.cpp"]);
    restore();
    files.forEach((f, i) => expect(readFileSync(join(dir, f)).equals(before[i]!)).toBe(true));
    expect(readdirSync(join(dir, "llama/addon")).sort()).toEqual(["AddonContext.cpp", "AddonContext.h"]);
  });

  it("a patch that does not apply fails the build with its name, and leaves the source as it was", () => {
    const { dir, files } = addonCopy();
    const patches = mkdtempSync(join(tmpdir(), "svc-patches-"));
    dirs.push(patches);
    for (const name of ADDON_PATCHES) cpSync(join(enginePatchesDirectory(), `${name}.patch`), join(patches, `${name}.patch`));
    const good = readFileSync(join(enginePatchesDirectory(), "addon-hooks.patch"), "utf8");
    // The first file's hunks apply, the second's context is another version's (as after a node-llama-cpp update).
    writeFileSync(join(patches, "addon-hooks.patch"), good.replace("         llama_context* ctx = nullptr;", "         llama_context* context = nullptr;"));
    const before = files.map((f) => readFileSync(join(dir, f)));
    expect(() => applyAddonPatches(dir, patches)).toThrow(/the patch addon-hooks\.patch does not apply to node-llama-cpp/);
    files.forEach((f, i) => expect(readFileSync(join(dir, f)).equals(before[i]!)).toBe(true));
    // Our code is taken out again too.
    expect(readdirSync(join(dir, "llama/addon")).sort()).toEqual(["AddonContext.cpp", "AddonContext.h"]);
  });

  it("a build is named by a hash of what it is made from: our code, the patches, node-llama-cpp's version and the options", () => {
    const id = engineBuildId();
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(engineBuildOptions()).toEqual({ ...ENGINE_BASE_OPTIONS, SVC_BUILD_ID: id });
    // Copies of the three inputs, each changed in turn: each change is another build.
    const { native, patches, nodeLlamaCpp } = identityInputs();
    const of = () => engineBuildId({ native, patches, nodeLlamaCpp });
    expect(of()).toBe(id);
    writeFileSync(join(native, "solo-loop.cpp"), readFileSync(join(native, "solo-loop.cpp"), "utf8") + "\n// changed\n");
    const afterNative = of();
    expect(afterNative).not.toBe(id);
    writeFileSync(join(patches, "sgemm-few-columns.patch"), readFileSync(join(patches, "sgemm-few-columns.patch"), "utf8").replace("gemv<4>", "gemv<5>"));
    const afterPatch = of();
    expect(afterPatch).not.toBe(afterNative);
    const pkg = JSON.parse(readFileSync(join(nodeLlamaCpp, "package.json"), "utf8")) as { version: string };
    writeFileSync(join(nodeLlamaCpp, "package.json"), JSON.stringify({ ...pkg, version: "3.22.2" }));
    expect(of()).not.toBe(afterPatch);
  });

  it("an addon build is named by a hash of our code, the hooks' patch, the CMake project, node-llama-cpp's version and the backend", () => {
    const id = engineAddonBuildId("cpu");
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(engineAddonBuildOptions("cpu")).toEqual({ SVC_ADDON_BUILD_ID: id });
    // One a backend: the same sources against other prebuilt libraries are another build.
    expect(new Set([id, engineAddonBuildId("cuda"), engineAddonBuildId("vulkan")]).size).toBe(3);
    expect(id).not.toBe(engineBuildId());
    const { native, patches, nodeLlamaCpp, project } = identityInputs();
    const of = () => engineAddonBuildId("cpu", { native, patches, nodeLlamaCpp, project });
    expect(of()).toBe(id);
    // Nothing of llama.cpp is compiled: its patches do not change the build.
    writeFileSync(join(patches, "sgemm-few-columns.patch"), readFileSync(join(patches, "sgemm-few-columns.patch"), "utf8").replace("gemv<4>", "gemv<5>"));
    expect(of()).toBe(id);
    const seen = new Set([id]);
    const changed = () => {
      const next = of();
      expect(seen.has(next)).toBe(false);
      seen.add(next);
    };
    writeFileSync(join(native, "solo-loop.cpp"), readFileSync(join(native, "solo-loop.cpp"), "utf8") + "\n// changed\n");
    changed();
    writeFileSync(join(patches, "addon-hooks.patch"), readFileSync(join(patches, "addon-hooks.patch"), "utf8") + "\n");
    changed();
    writeFileSync(join(project, "CMakeLists.txt"), readFileSync(join(project, "CMakeLists.txt"), "utf8") + "\n# changed\n");
    changed();
    const pkg = JSON.parse(readFileSync(join(nodeLlamaCpp, "package.json"), "utf8")) as { version: string };
    writeFileSync(join(nodeLlamaCpp, "package.json"), JSON.stringify({ ...pkg, version: "3.22.2" }));
    changed();
  });

  it("an addon build is made against the prebuilt binaries npm installed for the backend, in the folder node-llama-cpp looks for", async () => {
    const cpu = prebuiltBinaries("cpu", "linux", "x64");
    if (process.platform === "linux" && process.arch === "x64") {
      expect(cpu).not.toBeNull();
      expect(readdirSync(cpu!.folder)).toEqual(expect.arrayContaining(["llama-addon.node", "_nlcBuildMetadata.json", "libggml-base.so"]));
      expect(cpu!.fallback).toBeNull();
      const cuda = prebuiltBinaries("cuda", "linux", "x64");
      // CUDA's fallback libraries come from its -ext package, where npm installed it.
      if (cuda?.fallback) expect(readdirSync(cuda.fallback)).toContain("libggml-cuda.so");
    }
    // None for a platform npm installed nothing for: the build says so instead of compiling.
    expect(prebuiltBinaries("cuda", "linux", "riscv64")).toBeNull();
    // Loading is checked in a process of its own: the CPU's binaries load, with no GPU device; a local build
    // that is not there does not.
    expect(probeLlama({ gpu: false })).toMatchObject({ devices: 0 });
    expect(probeLlama({ gpu: false, usePrebuiltBinaries: false, cmakeOptions: { SVC_ADDON_BUILD_ID: "no-such-build" } })).toBeNull();
    // node-llama-cpp's own name for a local build of these options: the platform, the GPU and a hash of the options.
    const options = { platform: "linux", arch: "x64", gpu: "vulkan", llamaCpp: { repo: "ggml-org/llama.cpp", release: "v0.5.0" } };
    const name = await localBuildFolderName(options, { SVC_ADDON_BUILD_ID: "0123456789abcdef" });
    expect(name).toMatch(/^linux-x64-vulkan-[0-9a-z]+$/);
    expect(await localBuildFolderName(options, { SVC_ADDON_BUILD_ID: "fedcba9876543210" })).not.toBe(name);
  });

  it("builds are told apart by their identity: another svc's is not loaded", () => {
    const current = engineBuildOptions();
    expect(engineBuildKind({ ...current })).toBe("current");
    expect(engineBuildKind({ ...ENGINE_BASE_OPTIONS, SVC_BUILD_ID: "0123456789abcdef" })).toBe("earlier");
    expect(engineBuildKind({ ...ENGINE_BASE_OPTIONS })).toBe("earlier");
    // Earlier svc versions named their builds after the patches compiled in.
    expect(engineBuildKind({ ...ENGINE_BASE_OPTIONS, SVC_ADDON_PATCHES: "persistent-threadpool,solo-loop-2,step-sampling,sgemm-few-columns" })).toBe("earlier");
    expect(engineBuildKind({ ...ENGINE_BASE_OPTIONS, GGML_NATIVE: "ON", SVC_BUILD_ID: current.SVC_BUILD_ID! })).toBeNull();
    expect(engineBuildKind({})).toBeNull();
    expect(engineBuildKind(undefined)).toBeNull();
  });

  it("keeps builds outside node_modules: SVC_ENGINE_BUILDS_DIR, else the platform's cache folder", () => {
    expect(engineBuildStore({ SVC_ENGINE_BUILDS_DIR: "/tmp/x" })).toBe("/tmp/x");
    expect(engineBuildStore({ XDG_CACHE_HOME: "/c" })).toBe("/c/svc-desktop/engine-builds");
    expect(engineBuildStore({})).toMatch(/\/\.cache\/svc-desktop\/engine-builds$/);
    expect(engineBuildStore({})).not.toContain("node_modules");
  });

  it("the server suggests a build only on Linux, with the prebuilt binaries: llama.cpp for the CPU, our addon for CUDA or Vulkan", () => {
    const hint = engineBuildHint({ backend: "cpu", build: "prebuilt" }, "linux");
    expect(hint).toMatch(/^The CPU runs node-llama-cpp's prebuilt llama.cpp binaries\. `svc engine build` compiles them on this machine/);
    expect(hint).toContain("needs cmake, make, git, patch and a C++ compiler");
    expect(engineBuildHintInWindow({ backend: "cpu", build: "prebuilt" }, "linux")).toBe(ENGINE_BUILD_HINT_IN_WINDOW);
    for (const [backend, label] of [["cuda", "CUDA"], ["vulkan", "Vulkan"]] as const) {
      const gpu = engineBuildHint({ backend, build: "prebuilt" }, "linux");
      expect(gpu).toMatch(new RegExp(`^${label} runs node-llama-cpp's prebuilt addon\\. \`svc engine build\` compiles svc's addon for its prebuilt libraries \\(about 15 seconds`));
      const inWindow = engineBuildHintInWindow({ backend, build: "prebuilt" }, "linux");
      expect(inWindow).toMatch(new RegExp(`^${label} runs node-llama-cpp's prebuilt addon\\.`));
      expect(inWindow).not.toMatch(/svc engine|--help/);
      expect(engineBuildHint({ backend, build: "local" }, "linux")).toBeNull();
    }
    for (const gpu of [{ backend: "cpu", build: "local" }, { backend: "metal", build: "prebuilt" }] as const) {
      expect(engineBuildHint(gpu, "linux")).toBeNull();
      expect(engineBuildHintInWindow(gpu, "linux")).toBeNull();
    }
    for (const platform of ["darwin", "win32"] as const) {
      expect(engineBuildHint({ backend: "cpu", build: "prebuilt" }, platform)).toBeNull();
      expect(engineBuildHint({ backend: "cuda", build: "prebuilt" }, platform)).toBeNull();
    }
  });
});
