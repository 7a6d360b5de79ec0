// `svc engine build` for real: compiles node-llama-cpp's CPU binaries from the bundled llama.cpp source
// (minutes), then a server started afterwards runs on them; `svc engine remove` goes back to the prebuilt
// binaries. Not part of `npm test` (it takes 10 to 15 minutes on 2 cores and would put every other test
// running beside it on the new binaries): `npm run test:engine-build`, which CI runs after `npm test`.
import { afterAll, describe, expect, inject, it } from "vitest";
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { prebuiltBinaries } from "../../server/engine/engine-addon-build.js";
import {
  engineBuildOptions,
  engineBuildStore,
  findEngineBuilds,
  llamaCppSourceDirectory,
  localBuildsDirectory,
  nodeLlamaCppDirectory,
} from "../../server/engine/engine-build.js";
import { SOLO_AHEAD, SOLO_MAX_SAMPLES } from "../../server/engine/slot-loop.js";
import { llamaCppBundleFile, removeLlamaCppBundleClone } from "../support/llama-cpp-bundle.js";
import { createKey, ROOT, runSvc, runSvcAsync, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

// A current build (one made by an earlier svc, with other patches, is not loaded and is not kept).
const hadBuild = (await findEngineBuilds()).some((b) => b.current);
const hadBuildsFolder = existsSync(localBuildsDirectory());
const servers: SvcServer[] = [];

afterAll(async () => {
  removeLlamaCppBundleClone();
  await Promise.all(servers.map((s) => s.stop()));
  // Leave a developer's own build where it was.
  if (!hadBuild) runSvc(["engine", "remove"]);
  // And the folder node-llama-cpp made for it, when there was none before.
  if (!hadBuildsFolder) rmSync(localBuildsDirectory(), { recursive: true, force: true });
});

async function serveAndAsk(model: string = inject("tinyModelPath")): Promise<{ build: string; localBuild: string | null; content: string; together: string[]; log: string }> {
  const dataDir = tempDataDir();
  const key = createKey(dataDir);
  const server = await startSvc({ model, dataDir, env: { SVC_LOG_LEVEL: "info" } });
  servers.push(server);
  let health: { model?: { state?: string }; gpu?: { build?: string; local_build?: string | null } } = {};
  for (let i = 0; i < 120 && health.model?.state !== "ready"; i++) {
    health = (await (await fetch(`${server.url}/health`)).json()) as typeof health;
    if (health.model?.state !== "ready") await new Promise((r) => setTimeout(r, 250));
  }
  const ask = async (content: string, maxTokens: number) => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc", messages: [{ role: "user", content }], max_tokens: maxTokens, temperature: 0 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }>; usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    return body.choices[0]!.message.content;
  };
  const content = await ask("Say something.", 8);
  // Three answers asked at once: where they overlap, a step decodes 2 or 3 tokens together (sgemm-few-columns.patch's matrix code).
  const together = await Promise.all(["One thing.", "Another thing, longer.", "A third."].map((q) => ask(q, 24)));
  await server.stop();
  return { build: health.gpu?.build ?? "", localBuild: health.gpu?.local_build ?? null, content, together, log: server.output() };
}

/** This process's threads around two decodes at 2 threads (test/support/decode-threads.mjs), in a fresh process. */
function decodeThreads(): { build: string; before: number; afterFirst: number; afterSecond: number } {
  const run = spawnSync(process.execPath, [join(ROOT, "test", "support", "decode-threads.mjs"), inject("tinyModelPath")], { encoding: "utf8", cwd: ROOT });
  expect(run.status, run.stderr.slice(-2000)).toBe(0);
  return JSON.parse(run.stdout.trim().split("\n").at(-1)!) as ReturnType<typeof decodeThreads>;
}

/** The slot loop's paths on the build (solo runs, samplings in the decode's job) against node-llama-cpp's evaluate (test/support/solo-steps.ts), in a fresh process. */
type RunFacts = { runs: number; longest: number; sampled: number; deliveries: number; distinct?: number; stepSamplings?: number; [fact: string]: unknown };
type SoloFacts = { build: string } & Partial<
  Record<"greedy" | "seeded" | "budget" | "interrupted", RunFacts> & Record<"penalties" | "stalled" | "together", Record<string, unknown>> & {
      newcomer: { sameTokens: boolean; firstPromptTokens: number; sampledWith: Array<{ sequence: string | number; tokens: number }> };
      slowTogether: { slowSteps: number; [fact: string]: unknown };
      speculation: { paths: Record<string, boolean> } & Record<"greedy" | "seeded", { sameTokens: boolean; sameState: boolean; drafted: number; accepted: number }>;
      echoSolo: { tokens: number; accepted: number; runs: number };
      draft: Record<"draftRounds" | "sure" | "next" | "alone" | "together" | "timed", boolean> & { decodes: number; laterRounds: number[] };
    }
>;
function soloSteps(): SoloFacts {
  const run = spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "test", "support", "solo-steps.ts")], { encoding: "utf8", cwd: ROOT });
  expect(run.status, run.stderr.slice(-2000)).toBe(0);
  return JSON.parse(run.stdout.trim().split("\n").at(-1)!) as SoloFacts;
}

/** A token's logits in steps of each shape (test/support/logits-invariance.ts), in a fresh process. */
function logitsInvariance(): { build: string } & Record<string, unknown> {
  const run = spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "test", "support", "logits-invariance.ts")], { encoding: "utf8", cwd: ROOT });
  expect(run.status, run.stderr.slice(-2000)).toBe(0);
  return JSON.parse(run.stdout.trim().split("\n").at(-1)!) as { build: string } & Record<string, unknown>;
}

/** The tiny model with Q8_0 layer matrices, written once to a temporary folder (removed with the data dirs). */
function tinyQ8Model(): string {
  const path = join(tempDataDir(), "tiny-q8_0.gguf");
  writeFileSync(path, buildTinyModel({ blockWeights: "q8_0" }));
  return path;
}

const SGEMM = "ggml/src/ggml-cpu/llamafile/sgemm.cpp";
const sgemmSource = () => readFileSync(join(llamaCppSourceDirectory(), SGEMM), "utf8");
const addonSource = () => ["AddonContext.cpp", "AddonContext.h"].map((f) => readFileSync(join(nodeLlamaCppDirectory(), "llama", "addon", f), "utf8"));

describe("svc engine build", () => {
  it("compiles the CPU binaries; the next server runs on them and answers as with the prebuilt ones; remove goes back", async () => {
    const before = await serveAndAsk();
    expect(before.build).toBe(hadBuild ? "local" : "prebuilt");
    // On the prebuilt binaries the server names this command after loading the model; on the build, not.
    const hint = "The CPU runs node-llama-cpp's prebuilt llama.cpp binaries. `svc engine build` compiles them on this machine";
    if (hadBuild) expect(before.log).not.toContain(hint);
    else expect(before.log).toContain(hint);
    const threadsBefore = decodeThreads();
    const source = addonSource();
    // A fresh install has llama.cpp's source only in node-llama-cpp's bundle; the build unpacks it first (so
    // that our patch to it applies), and a developer's may be unpacked already.
    const hadSource = existsSync(join(llamaCppSourceDirectory(), ".git"));
    const sgemm = llamaCppBundleFile(SGEMM).toString("utf8");
    if (hadSource) expect(sgemmSource()).toBe(sgemm);

    const build = await runSvcAsync(["engine", "build"]);
    // Named by the hash of what it is made from (test/unit/engine-patches.test.ts).
    const id = engineBuildOptions().SVC_BUILD_ID!;
    expect(build.stderr).toContain(`Building llama.cpp for the CPU (GGML_NATIVE=OFF GGML_OPENMP=OFF GGML_BACKEND_DL=ON GGML_CPU_ALL_VARIANTS=ON SVC_BUILD_ID=${id})`);
    expect(build.status, build.stderr.slice(-3000)).toBe(0);
    // Kept outside node_modules, in the platform's cache folder.
    const store = engineBuildStore();
    expect(build.stdout).toMatch(new RegExp(`^Built in \\d+\\.\\d min: ${store.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/linux-x64-\\S+\\.$`, "m"));
    const made = (await findEngineBuilds()).find((b) => b.current);
    expect(made).toBeDefined();
    expect(made!.folder.startsWith(`${store}/`)).toBe(true);
    expect(runSvc(["engine"]).stdout).toContain(`CPU: llama.cpp built on this machine (${made!.release}): ${made!.folder}`);

    // Our code and its hooks were compiled in and taken out of node-llama-cpp's source again.
    expect(addonSource()).toEqual(source);
    expect(source[0]).not.toContain("ensureThreadpool");
    expect(source[0]).not.toContain("RunSolo");
    expect(source[0]).not.toContain("DecodeBatchAndSample");
    expect(existsSync(join(nodeLlamaCppDirectory(), "llama", "addon", "svc"))).toBe(false);

    // A reinstall of the packages (npm ci) deletes node-llama-cpp's folder and the working copy of the build
    // in it: the next server puts it back from the store and runs on it.
    const workingCopy = join(localBuildsDirectory(), basename(made!.folder));
    expect(existsSync(join(workingCopy, "Release", "_nlcBuildMetadata.json"))).toBe(true);
    rmSync(workingCopy, { recursive: true, force: true });
    const after = await serveAndAsk();
    expect(after.build).toBe("local");
    expect(after.localBuild).toBe("full");
    expect(existsSync(join(workingCopy, "Release", "_nlcBuildMetadata.json"))).toBe(true);
    expect(after.log).not.toContain(hint);
    // Same source, same greedy answer.
    expect(after.content).toBe(before.content);
    // sgemm-few-columns.patch: the answers generated together (the tiny model's weights are F32) are the same
    // as with llama.cpp's own matrix code (each sum taken in the same order), and the build's x86 libraries
    // have the new code compiled in, for F32 and for Q8_0 weights (its symbols; the prebuilt libraries have none).
    expect(after.together).toEqual(before.together);
    // amx-tile-config.patch: the tiny model with its layer's matrices in Q8_0 (zeros, so the same answers) runs
    // llama.cpp's quantized kernels; on a CPU with AMX (Sapphire Rapids and later) a prompt takes the tile
    // kernels, which GCC 12 built crashing on their first instruction (SIGILL) without the patch.
    const quantized = await serveAndAsk(tinyQ8Model());
    expect(quantized.build).toBe("local");
    expect(quantized.log).not.toContain("The engine process stopped");
    expect(quantized.content).toBe(after.content);
    expect(quantized.together).toEqual(after.together);
    const libraries = readdirSync(join(made!.folder, "Release")).filter((f) => /^libggml-cpu-(haswell|skylakex|zen4)\.so$/.test(f));
    expect(libraries.sort()).toEqual(["libggml-cpu-haswell.so", "libggml-cpu-skylakex.so", "libggml-cpu-zen4.so"]);
    for (const lib of libraries) {
      const binary = readFileSync(join(made!.folder, "Release", lib));
      expect(binary.includes("_fffE4gemvILi4EEEvl"), `${lib}: F32`).toBe(true);
      expect(binary.includes("tinyBLAS_Q0_AVXI10block_q8_0S1_fE4gemvILi4EEEvl"), `${lib}: Q8_0`).toBe(true);
    }
    // The llama.cpp source is unpacked (it was not, in CI) and as shipped again.
    expect(sgemmSource()).toBe(sgemm);
    expect(sgemm).not.toContain("gemv<4>");

    // threadpool.cpp: a decode at 2 threads leaves one ggml worker running for the next ones
    // (the prebuilt binaries start and join it inside every decode).
    const threadsAfter = decodeThreads();
    expect(threadsAfter.build).toBe("local");
    expect(threadsAfter.afterFirst - threadsAfter.before).toBe(1);
    expect(threadsAfter.afterSecond).toBe(threadsAfter.afterFirst);
    // solo-loop.cpp: a lone generation's first token is sampled in the job that reads its prompt, and every
    // token after it in solo runs on the binding's own thread (at most SOLO_MAX_SAMPLES a run; a run also ends early when the generation is slow to ask, so the count
    // of runs is a floor), with evaluate's tokens and sequence state; another evaluation ends a run and both
    // get their answers; repeat penalties stay on the token-by-token path. A run samples up to SOLO_AHEAD
    // tokens past the last one taken (taken out of the sequence again when the generation stops), and posts
    // them to JavaScript several at a time: on this tiny model, which makes a token in well under a
    // millisecond, a run waits for JavaScript only SOLO_AHEAD tokens ahead, and posts what it has then.
    const solo = soloSteps();
    expect(solo.build).toBe("local");
    expect(solo.greedy).toMatchObject({ sameTokens: true, sameState: true, promptSampled: 1, stepDecodes: 0, samplings: 0 });
    expect(solo.greedy!.sampled).toBeGreaterThanOrEqual(149);
    expect(solo.greedy!.sampled).toBeLessThanOrEqual(149 + SOLO_AHEAD);
    expect(solo.greedy!.deliveries * 2).toBeLessThanOrEqual(solo.greedy!.sampled);
    expect(solo.greedy!.runs).toBeGreaterThanOrEqual(Math.ceil(150 / SOLO_MAX_SAMPLES));
    expect(solo.greedy!.longest).toBeLessThanOrEqual(SOLO_MAX_SAMPLES);
    expect(solo.seeded).toMatchObject({ sameTokens: true });
    expect(solo.seeded!.sampled).toBeGreaterThanOrEqual(79);
    expect(solo.seeded!.sampled).toBeLessThanOrEqual(79 + SOLO_AHEAD);
    expect(solo.seeded!.longest).toBeLessThanOrEqual(SOLO_MAX_SAMPLES);
    expect(solo.seeded!.distinct).toBeGreaterThan(10);
    // Tokens 1 to 9 decoded ahead; the 10th, where the budget ends, not; nothing sampled past it (the first
    // token is sampled in the prompt's job, the other 9 in solo runs).
    expect(solo.budget).toMatchObject({ next: 9, sampled: 9 });
    // The first answer's first 20 tokens (or more) came from a solo run, the rest as the two stepped together
    // (and the one left alone at the end may go solo again, up to SOLO_AHEAD past its last token).
    expect(solo.interrupted).toMatchObject({ sameTokens: true });
    expect(solo.interrupted!.sampled).toBeGreaterThanOrEqual(20);
    expect(solo.interrupted!.stepSamplings).toBeGreaterThan(0);
    expect(solo.interrupted!.sampled + solo.interrupted!.stepSamplings!).toBeGreaterThanOrEqual(120);
    expect(solo.interrupted!.sampled + solo.interrupted!.stepSamplings!).toBeLessThanOrEqual(121 + SOLO_AHEAD);
    expect(solo.penalties).toEqual({ runs: 0, samplings: 20 });
    // A prompt sent while a lone one is read waits for the next batch; the lone one's first token does not
    // wait with it: it is sampled in the batch that read the lone prompt (before, the lone prompt's last token
    // was held back for a solo run and went in the next batch, with all of the second prompt).
    expect(solo.newcomer).toEqual({ sameTokens: true, firstPromptTokens: expect.any(Number), sampledWith: [{ sequence: "first", tokens: solo.newcomer!.firstPromptTokens }] });
    // step-sampling.cpp: three sequences stepping together have every token sampled in its decode's job
    // (each stream's 40th token decoded ahead has the one after it sampled too, unused), none in a sampling
    // job of its own, with evaluate's tokens and state; a reader slower than the wait for asks is given the
    // token sampled before it asked, with nothing decoded twice.
    expect(solo.together).toEqual({ sameTokens: true, sameState: true, stepSampled: 123, samplings: 0, runs: 0 });
    expect(solo.slowTogether).toMatchObject({ sameTokens: true, sameState: true, slowDecodedTwice: 0, samplings: 0, runs: 0 });
    expect(solo.slowTogether!.slowSteps).toBeGreaterThanOrEqual(12);
    // A reader that stalls after 5 tokens lets the context go; what was decoded past its 4th token is taken
    // out again (the 5th and those after it, sampled ahead).
    expect(solo.stalled).toEqual({ outcome: "read", next: 4 });
    // Speculation beside the build's paths (issue 44): evaluate's tokens and state, greedy and seeded, where
    // the answer repeats the conversation, with guesses checked on the way.
    expect(solo.speculation!.paths).toEqual({ solo: true, stepSampling: true, speculation: true, queuedSamplings: true });
    expect(solo.speculation!.greedy).toMatchObject({ sameTokens: true, sameState: true });
    expect(solo.speculation!.seeded).toMatchObject({ sameTokens: true, sameState: true });
    expect(solo.speculation!.greedy.drafted).toBeGreaterThan(0);
    // An answer that repeats its prompt from its first token: steps with guesses from the first one prompt
    // lookup finds (96 of 100 tokens guessed here; 92 when a solo run started it, 64 when that run wrote its
    // 32 first), and no solo run between them (each cost two handovers of the context: performance.md section 42).
    expect(solo.echoSolo).toMatchObject({ tokens: 100, runs: 0 });
    expect(solo.echoSolo!.accepted).toBeGreaterThanOrEqual(85);
    // draft-rounds.cpp: a draft model's rounds in one job, none through the decodes of node-llama-cpp's
    // binding, with the guesses and the rules of the JavaScript rounds (test/e2e/draft-model.test.ts). Each job
    // counts and times its rounds after the first, which the thread policy reads as lone decodes (loneRoundMs).
    expect(solo.draft).toEqual({ draftRounds: true, decodes: 0, sure: true, next: true, alone: true, together: true, laterRounds: [7, 3, 2, 1, 2], timed: true });
    // flash-attn-few-queries.patch, sgemm-few-columns.patch, sgemm-q6k-cols.patch and repack-gemv-order.patch: a
    // token's logits are the same to the bit in a step of any shape (alone at 1 or 2 threads, with 16 guesses
    // after it, beside other sequences' tokens, with guesses beside them), at heads of 64 and 128 values, with
    // F32, Q8_0, Q4_0, Q4_K, Q6_K and Q2_K layers, past 512 tokens of context; so a guess is kept exactly where the model alone writes
    // it. (llama.cpp's own kernels sum a lone token's attention and matrix products in other orders:
    // docs/performance.md sections 47 and 49.)
    const every = { logits: true, aloneTwoThreads: true, withGuesses: true, besideOthers: true, besideOthersWithGuesses: true };
    expect(logitsInvariance()).toEqual({ build: "local", heads64: every, heads128: every, heads128Q8_0: every, heads128Q4_0: every, heads128Q4K: every, heads128Q6K: every, heads128Q2K: every });

    if (!hadBuild) {
      expect(threadsBefore.build).toBe("prebuilt");
      expect(threadsBefore.afterFirst).toBe(threadsBefore.before);
    }

    if (hadBuild) return;
    const removed = runSvc(["engine", "remove"]);
    expect(removed.status).toBe(0);
    expect(removed.stdout).toContain(`Removed ${made!.folder}.`);
    expect(await findEngineBuilds()).toEqual([]);
    expect(existsSync(made!.folder)).toBe(false);
    expect(existsSync(workingCopy)).toBe(false);
    const removedAfter = await serveAndAsk();
    expect(removedAfter.build).toBe("prebuilt");
    expect(removedAfter.localBuild).toBeNull();
    expect(removedAfter.log).toContain(hint);
  });
});

describe("svc engine build, the addon alone", () => {
  it("compiles svc's addon against node-llama-cpp's prebuilt CPU libraries (--addon-only) in seconds: the next server runs on it, with the build's paths and the same answers; a GPU backend's (--gpu vulkan, --gpu cuda) compiles where no GPU runs it", async () => {
    // A full CPU build comes first where both exist: a developer's builds are set aside for this test (CI's
    // first test removed its own), beside the folder that holds each, so that it is renamed on its own file
    // system and not read as a build there.
    const moved: Array<[string, string]> = [];
    for (const b of await findEngineBuilds())
      for (const folder of new Set([b.folder, join(localBuildsDirectory(), basename(b.folder))]))
        if (existsSync(folder)) {
          const to = join(dirname(dirname(folder)), `svc-test-aside-${moved.length}-${basename(folder)}`);
          renameSync(folder, to);
          moved.push([folder, to]);
        }
    try {
      const source = addonSource();
      const before = await serveAndAsk();
      expect(before.build).toBe("prebuilt");
      expect(before.localBuild).toBeNull();

      const build = await runSvcAsync(["engine", "build", "--addon-only"]);
      expect(build.status, build.stderr.slice(-3000)).toBe(0);
      expect(build.stderr).toContain("Building svc's addon for node-llama-cpp's prebuilt CPU binaries (seconds; llama.cpp is not compiled).");
      const store = engineBuildStore();
      expect(build.stdout).toMatch(new RegExp(`^Built in \\d+ s: ${store.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/linux-x64-\\S+\\.$`, "m"));
      const made = (await findEngineBuilds()).find((b) => b.current && b.addonOnly && b.backend === "cpu");
      expect(made).toBeDefined();
      expect(made!.folder.startsWith(`${store}/`)).toBe(true);
      expect(runSvc(["engine"]).stdout).toContain(`CPU: svc's addon built on this machine for node-llama-cpp's prebuilt llama.cpp (${made!.release}): ${made!.folder}`);
      // Our addon beside links to the prebuilt libraries it was compiled against; node-llama-cpp's source as it was.
      const prebuilt = prebuiltBinaries("cpu")!;
      const release = join(made!.folder, "Release");
      expect(lstatSync(join(release, "llama-addon.node")).isSymbolicLink()).toBe(false);
      expect(readFileSync(join(release, "llama-addon.node")).equals(readFileSync(join(prebuilt.folder, "llama-addon.node")))).toBe(false);
      expect(readlinkSync(join(release, "libggml-base.so"))).toBe(join(prebuilt.folder, "libggml-base.so"));
      expect(addonSource()).toEqual(source);
      expect(existsSync(join(nodeLlamaCppDirectory(), "llama", "addon", "svc"))).toBe(false);

      // A reinstall removes the working copy in node-llama-cpp's folder: the next server puts it back and runs on it.
      const workingCopy = join(localBuildsDirectory(), basename(made!.folder));
      rmSync(workingCopy, { recursive: true, force: true });
      const after = await serveAndAsk();
      expect(after.build).toBe("local");
      expect(after.localBuild).toBe("addon");
      expect(existsSync(join(workingCopy, "Release", "_nlcBuildMetadata.json"))).toBe(true);
      expect(after.content).toBe(before.content);
      expect(after.together).toEqual(before.together);
      // The addon's paths, as on the full build: a ggml worker kept between decodes, solo runs, samplings in the decode's job, speculation.
      const threads = decodeThreads();
      expect(threads.build).toBe("local");
      expect(threads.afterFirst - threads.before).toBe(1);
      expect(threads.afterSecond).toBe(threads.afterFirst);
      const solo = soloSteps();
      expect(solo.build).toBe("local");
      expect(solo.greedy).toMatchObject({ sameTokens: true, sameState: true, stepDecodes: 0, samplings: 0 });
      expect(solo.greedy!.sampled).toBeGreaterThanOrEqual(150);
      expect(solo.together).toEqual({ sameTokens: true, sameState: true, stepSampled: 123, samplings: 0, runs: 0 });
      expect(solo.speculation!.paths).toEqual({ solo: true, stepSampling: true, speculation: true, queuedSamplings: true });
      expect(solo.speculation!.greedy).toMatchObject({ sameTokens: true, sameState: true });
      expect(solo.echoSolo).toMatchObject({ tokens: 100, runs: 0 });
      expect(solo.draft).toEqual({ draftRounds: true, decodes: 0, sure: true, next: true, alone: true, together: true, laterRounds: [7, 3, 2, 1, 2], timed: true });

      // GPU backends: the addon compiled against their prebuilt libraries (no CUDA or Vulkan SDK here, nor a GPU).
      for (const backend of ["vulkan", "cuda"] as const) {
        const libraries = prebuiltBinaries(backend);
        if (libraries === null) continue;
        const label = backend === "cuda" ? "CUDA" : "Vulkan";
        const gpuBuild = await runSvcAsync(["engine", "build", "--gpu", backend]);
        expect(gpuBuild.status, gpuBuild.stderr.slice(-3000)).toBe(0);
        expect(gpuBuild.stdout).toContain(`Not loaded to check it: ${label} does not run on this machine (no driver or GPU device).`);
        const gpuMade = (await findEngineBuilds()).find((b) => b.current && b.addonOnly && b.backend === backend);
        expect(gpuMade).toBeDefined();
        expect(runSvc(["engine"]).stdout).toContain(`${label}: svc's addon built on this machine for node-llama-cpp's prebuilt llama.cpp (${gpuMade!.release}): ${gpuMade!.folder}`);
        // It links the backend's llama.cpp library (libllama.cuda.v0.5.0.so, say), which node-llama-cpp names by backend.
        const libllama = readdirSync(libraries.folder).find((f) => /^libllama\.[a-z]+\.v.*\.so$/.test(f));
        expect(libllama).toContain(`.${backend}.`);
        expect(readFileSync(join(gpuMade!.folder, "Release", "llama-addon.node")).includes(libllama!)).toBe(true);
        if (libraries.fallback !== null) expect(readlinkSync(join(gpuMade!.folder, "Release", "fallback"))).toBe(libraries.fallback);
      }
      // The CPU keeps its own build; a server here runs it.
      expect((await findEngineBuilds()).find((b) => b.current && b.backend === "cpu")?.folder).toBe(made!.folder);

      const removed = runSvc(["engine", "remove"]);
      expect(removed.status).toBe(0);
      expect(removed.stdout).toContain(`Removed ${made!.folder}.`);
      expect(await findEngineBuilds()).toEqual([]);
      expect(existsSync(workingCopy)).toBe(false);
    } finally {
      if (moved.length > 0) {
        mkdirSync(localBuildsDirectory(), { recursive: true });
        mkdirSync(engineBuildStore(), { recursive: true });
      }
      for (const [folder, to] of moved) renameSync(to, folder);
    }
  });
});
