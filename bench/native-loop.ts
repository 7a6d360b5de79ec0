// How fast could a generation loop of our own drive the llama.cpp node-llama-cpp ships? A measurement for
// issue 20's "thinner path of our own to the same llama.cpp", before anyone builds one.
//
// The loop here calls llama.cpp's C API in node-llama-cpp's own shared libraries through FFI (koffi, which
// ships prebuilt and needs no compiler): decode, then greedy sampling, on the calling thread, with none of
// node-llama-cpp's per-token trips through the libuv pool. It runs alternated, round after round, with
// llama.cpp's own llama-batched-bench built from the same source (static, -march=native, OpenMP; the build
// bench:peer makes), for one sequence and for several decoded together, at each thread count. Ratios are
// loop ÷ llama-batched-bench (higher is better); llama-batched-bench does not sample, the loop does.
//
// Usage: npm run bench:native-loop [-- --model PATH.gguf] [--threads 1,2] [--rounds N] [--tokens N]
//                                     [--sequences N] [--bins DIR]
// --bins: another build's folder of libraries (e.g. one `svc engine build` made). Linux x64 only; the C
// structures are laid out for the llama.cpp node-llama-cpp 3.22 ships and checked against its defaults.
// Not part of `npm test`.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import koffi from "koffi";
import { median } from "./common.js";
import { ensurePeerTool, PEER_CACHE } from "./llama-server-build.js";
import { ensurePeerModel } from "./peer-model.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string" },
    rounds: { type: "string", default: "3" },
    tokens: { type: "string", default: "200" },
    sequences: { type: "string", default: "4" },
    bins: { type: "string" },
  },
});
const rounds = Number(values.rounds);
const tokens = Number(values.tokens);
const sequences = Number(values.sequences);
const threadCounts = [...new Set((values.threads ?? `1,${availableParallelism()}`).split(",").map((s) => Number(s.trim())))];
const PROMPT = 16;
const log = (line: string) => process.stderr.write(`${line}\n`);

if (process.platform !== "linux" || process.arch !== "x64") {
  log("bench:native-loop runs on Linux x64 only.");
  process.exit(1);
}

// ---------------------------------------------------------------------------------------------------------
// llama.cpp through FFI

async function shippedBins(): Promise<string> {
  const require = createRequire(import.meta.url);
  const entry = require.resolve("@node-llama-cpp/linux-x64", { paths: [dirname(require.resolve("node-llama-cpp"))] });
  const { getBinsDir } = (await import(pathToFileURL(entry).href)) as { getBinsDir(): { binsDir: string } };
  return join(getBinsDir().binsDir, "linux-x64");
}

/** The library whose name starts with `prefix` (node-llama-cpp names them with a version, local builds with a hash too). */
function library(dir: string, prefix: string): string {
  const name = readdirSync(dir).find((f) => f.startsWith(prefix) && f.endsWith(".so"));
  if (!name) throw new Error(`no ${prefix}*.so in ${dir}`);
  return join(dir, name);
}

// Sizes and offsets in llama.h at the llama.cpp node-llama-cpp 3.22 ships (printed by a C program with offsetof).
const MODEL_PARAMS_SIZE = 80;
const MODEL_N_GPU_LAYERS = 16;
const CONTEXT_PARAMS_SIZE = 160;
const CTX = { nCtx: 0, nBatch: 4, nUbatch: 8, nSeqMax: 12 } as const;
koffi.struct("ModelParams", { raw: koffi.array("uint8_t", MODEL_PARAMS_SIZE) });
koffi.struct("ContextParams", { raw: koffi.array("uint8_t", CONTEXT_PARAMS_SIZE) });
koffi.struct("Batch", { n_tokens: "int32_t", token: "void*", embd: "void*", pos: "void*", n_seq_id: "void*", seq_id: "void*", logits: "void*" });
const LogCallback = koffi.proto("void LogCallback(int level, const char* text, void* data)");
/** llama.cpp's log lines, dropped (the model and context set-up print dozens to stderr otherwise). */
const quiet = koffi.register(() => {}, koffi.pointer(LogCallback));

class NativeLoop {
  private readonly f;
  private readonly ctx: unknown;
  private readonly batch: { n_tokens: number; token: unknown; embd: unknown; pos: unknown; n_seq_id: unknown; seq_id: unknown; logits: unknown };
  private readonly tok: Int32Array;
  private readonly pos: Int32Array;
  private readonly nSeq: Int32Array;
  private readonly seqIds: Int32Array[];
  private readonly outputs: Int8Array;
  private readonly sampler: unknown;
  private readonly memory: unknown;

  constructor(bins: string, model: string, maxSequences: number) {
    koffi.load(library(bins, "libggml-base"));
    const ggml = koffi.load(library(bins, "libggml.v"));
    const llama = koffi.load(library(bins, "libllama.v"));
    this.f = {
      loadAll: ggml.func("void ggml_backend_load_all_from_path(const char*)"),
      backendInit: llama.func("void llama_backend_init()"),
      modelDefaults: llama.func("ModelParams llama_model_default_params()"),
      contextDefaults: llama.func("ContextParams llama_context_default_params()"),
      loadModel: llama.func("void* llama_model_load_from_file(const char*, ModelParams)"),
      initContext: llama.func("void* llama_init_from_model(void*, ContextParams)"),
      batchInit: llama.func("Batch llama_batch_init(int32_t, int32_t, int32_t)"),
      decode: llama.func("int32_t llama_decode(void*, Batch)"),
      greedy: llama.func("void* llama_sampler_init_greedy()"),
      sample: llama.func("int32_t llama_sampler_sample(void*, void*, int32_t)"),
      getMemory: llama.func("void* llama_get_memory(void*)"),
      clear: llama.func("void llama_memory_clear(void*, bool)"),
      logSet: llama.func("void llama_log_set(LogCallback*, void*)"),
      setThreads: llama.func("void llama_set_n_threads(void*, int32_t, int32_t)"),
    };
    const f = this.f;
    f.logSet(quiet, null);
    f.loadAll(bins);
    f.backendInit();
    const modelParams = Buffer.from((f.modelDefaults() as { raw: number[] }).raw);
    const contextParams = Buffer.from((f.contextDefaults() as { raw: number[] }).raw);
    // The layout check: llama.cpp's documented defaults where this file expects them.
    if (modelParams.readInt32LE(MODEL_N_GPU_LAYERS) !== -1 || contextParams.readUInt32LE(CTX.nCtx) !== 512 || contextParams.readUInt32LE(CTX.nUbatch) !== 512 || contextParams.readUInt32LE(CTX.nSeqMax) !== 1) {
      throw new Error("llama.cpp's parameter structures are not laid out as this bench expects (another node-llama-cpp version?)");
    }
    modelParams.writeInt32LE(0, MODEL_N_GPU_LAYERS);
    const loaded = f.loadModel(model, { raw: [...modelParams] });
    if (!loaded) throw new Error(`llama.cpp could not load ${model}`);
    contextParams.writeUInt32LE((tokens + PROMPT + 8) * maxSequences, CTX.nCtx);
    contextParams.writeUInt32LE(512, CTX.nBatch);
    contextParams.writeUInt32LE(maxSequences, CTX.nSeqMax);
    this.ctx = f.initContext(loaded, { raw: [...contextParams] });
    if (!this.ctx) throw new Error("llama.cpp could not create the context");
    this.memory = f.getMemory(this.ctx);
    this.batch = f.batchInit(512, 0, 1) as NativeLoop["batch"];
    const view = (ptr: unknown, bytes: number) => koffi.view(ptr as never, bytes);
    this.tok = new Int32Array(view(this.batch.token, 4 * 512));
    this.pos = new Int32Array(view(this.batch.pos, 4 * 512));
    this.nSeq = new Int32Array(view(this.batch.n_seq_id, 4 * 512));
    this.seqIds = (koffi.decode(this.batch.seq_id as never, koffi.array("void*", 512)) as unknown[]).map((p) => new Int32Array(view(p, 4)));
    this.outputs = new Int8Array(view(this.batch.logits, 512));
    this.sampler = f.greedy();
  }

  /** Threads for every decode from now on (no thread pool is attached: each decode starts its own). */
  setThreads(threads: number): void {
    this.f.setThreads(this.ctx, threads, threads);
  }

  private decode(entries: Array<[token: number, pos: number, seq: number, output: boolean]>): void {
    entries.forEach(([token, pos, seq, output], i) => {
      this.tok[i] = token;
      this.pos[i] = pos;
      this.nSeq[i] = 1;
      this.seqIds[i]![0] = seq;
      this.outputs[i] = output ? 1 : 0;
    });
    this.batch.n_tokens = entries.length;
    const status = this.f.decode(this.ctx, this.batch) as number;
    if (status !== 0) throw new Error(`llama_decode returned ${status}`);
  }

  /** Aggregate tokens/s of `n` sequences generating `tokens` tokens each, decoded together, greedy. */
  generate(n: number): number {
    this.f.clear(this.memory, true);
    const prompt: Array<[number, number, number, boolean]> = [];
    for (let s = 0; s < n; s++) for (let i = 0; i < PROMPT; i++) prompt.push([10 + ((s * 7 + i) % 100), i, s, i === PROMPT - 1]);
    this.decode(prompt);
    let last = Array.from({ length: n }, (_, s) => this.f.sample(this.sampler, this.ctx, s * PROMPT + PROMPT - 1) as number);
    const start = performance.now();
    for (let step = 0; step < tokens; step++) {
      this.decode(last.map((t, s) => [t, PROMPT + step, s, true]));
      last = last.map((_, s) => this.f.sample(this.sampler, this.ctx, s) as number);
    }
    return (n * tokens * 1000) / (performance.now() - start);
  }
}

// ---------------------------------------------------------------------------------------------------------
// llama.cpp's own tool

/**
 * llama-batched-bench's rows for one and for `sequences` sequences. It prints through llama.cpp's log
 * thread, which at exit sometimes drops the last line (seen: the 4-sequence row missing, exit status 0),
 * so a third, short-lived row goes last and is not read.
 */
function batchedBench(tool: string, model: string, threads: number): { single: number; several: number } {
  const args = ["-m", model, "-c", String((tokens + PROMPT + 8) * sequences), "-npp", String(PROMPT), "-ntg", String(tokens), "-npl", `1,${sequences},1`, "-t", String(threads), "-tb", String(threads), "--output-format", "jsonl"];
  const result = spawnSync(tool, args, { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`llama-batched-bench failed: ${result.stderr.slice(-2000)}`);
  const rows = result.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { pl: number; speed_tg: number });
  const speed = (pl: number) => {
    const row = rows.find((r) => r.pl === pl);
    if (!row) throw new Error(`llama-batched-bench printed no row for ${pl} sequence(s); its output:\n${result.stdout.slice(-3000)}`);
    return row.speed_tg;
  };
  return { single: speed(1), several: speed(sequences) };
}

// ---------------------------------------------------------------------------------------------------------

const model = values.model ?? ensurePeerModel(join(PEER_CACHE, "model.gguf"));
const tool = ensurePeerTool("llama-batched-bench", log);
const bins = values.bins ?? (await shippedBins());
if (!existsSync(bins)) throw new Error(`no libraries in ${bins}`);
log(`model ${model}; libraries ${bins}; ${tokens} tokens, ${sequences} sequences, ${rounds} rounds`);

const loop = new NativeLoop(bins, model, sequences);
const table: string[] = [];
for (const threads of threadCounts) {
  loop.setThreads(threads);
  const ours = { single: [] as number[], several: [] as number[] };
  const peer = { single: [] as number[], several: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    const p = batchedBench(tool, model, threads);
    peer.single.push(p.single);
    peer.several.push(p.several);
    ours.single.push(loop.generate(1));
    ours.several.push(loop.generate(sequences));
    log(`threads ${threads} round ${round + 1}: loop ${ours.single.at(-1)!.toFixed(1)} / ${ours.several.at(-1)!.toFixed(1)}; llama-batched-bench ${p.single.toFixed(1)} / ${p.several.toFixed(1)} tokens/s; load ${loadavg()[0]!.toFixed(2)}`);
  }
  const row = (label: string, a: number[], b: number[]) =>
    `| ${label} | ${threads} | ${median(a).toFixed(1)} | ${median(b).toFixed(1)} | **${(median(a) / median(b)).toFixed(2)}** |`;
  table.push(row("one sequence", ours.single, peer.single), row(`${sequences} sequences together`, ours.several, peer.several));
}

console.log("\n| Decode + sample, tokens/s (medians) | threads | loop through FFI | llama-batched-bench | ratio |");
console.log("|---|---|---|---|---|");
for (const line of table) console.log(line);
