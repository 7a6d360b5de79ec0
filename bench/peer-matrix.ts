// bench:peer over the model shapes users run (issue 45): one model shape flatters one server, so the claim is
// the worst row of a matrix, not one model's figures. Each cell is one bench:peer run (both servers side by
// side, alternated rounds, the same binaries throughout) on a generated model:
//   - two sizes: bench:peer's 110 MB F32 model (n_embd 512, 8 layers, n_ff 1536) and a 0.8B-parameter one
//     (n_embd 2048, 16 layers, n_ff 5632: 0.5 GB in Q4_K_M, the shape of a small current model);
//   - two head sizes: 64 and 128 values (heads 8 and 4 at n_embd 512; 32 and 16 at n_embd 2048);
//   - three weight types: F32 (as generated), Q8_0 and Q4_K_M (quantized by llama.cpp's own llama-quantize,
//     built from the same source). The large model in F32 (3.3 GB, a third of a second a token on one core)
//     only with --large-f32.
// Both servers on the same KV cache type (f16) and flash attention (on): llama-server is given
// `-fa on -ctk f16 -ctv f16`; ours has node-llama-cpp's defaults, an f16 cache and flash attention "auto",
// which llama.cpp turns on on the CPU (the engine's load log: "flash_attn = auto", "Flash Attention enabled").
//
// Usage: npm run bench:peer-matrix [-- --threads 1] [--rounds 3] [--sizes small,large] [--heads 64,128]
//                                   [--types F32,Q8_0,Q4_K_M] [--large-f32] [--json OUT.json]
//                                   [--llama-server PATH]
// Prints one table per model size and a summary of the worst ratio per measure. Not part of `npm test`; on 2
// cores the small cells take about 3 minutes each, the large ones about 6 (the first run also generates the
// large model, 3.3 GB in F32, and quantizes it: a few minutes more).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureQuantized, PEER_CACHE, ROOT } from "./llama-server-build.js";
import { ensurePeerModel, PEER_MODEL, type PeerModelShape } from "./peer-model.js";

const { values } = parseArgs({
  options: {
    threads: { type: "string", default: "1" },
    rounds: { type: "string", default: "3" },
    sizes: { type: "string", default: "small,large" },
    heads: { type: "string", default: "64,128" },
    types: { type: "string", default: "F32,Q8_0,Q4_K_M" },
    "large-f32": { type: "boolean", default: false },
    json: { type: "string" },
    /** Another llama-server build (bench:peer's --llama-server), e.g. one built without AMX, to compare the layouts. */
    "llama-server": { type: "string" },
  },
});
const log = (line: string) => process.stderr.write(`${line}\n`);

interface Size {
  name: "small" | "large";
  label: string;
  shape: Omit<PeerModelShape, "nHead">;
  /** bench:peer's per-cell options: fewer tokens and a shorter prompt where a token costs more. */
  tokens: number;
  promptTokens: number;
  warmupStreams: number;
}
const SIZES: Size[] = [
  { name: "small", label: "110 MB F32 (n_embd 512, 8 layers, n_ff 1536)", shape: { ...PEER_MODEL }, tokens: 200, promptTokens: 2000, warmupStreams: 10 },
  {
    name: "large",
    label: "0.8B parameters (n_embd 2048, 16 layers, n_ff 5632; 0.5 GB in Q4_K_M)",
    shape: { nEmbd: 2048, nLayers: 16, nFf: 5632, contextLength: 32768, seed: 45 },
    tokens: 64,
    promptTokens: 256,
    warmupStreams: 2,
  },
];
const TYPES = ["F32", "Q8_0", "Q4_K_M"] as const;
type WeightType = (typeof TYPES)[number];

const sizes = SIZES.filter((s) => values.sizes!.split(",").includes(s.name));
const headSizes = values.heads!.split(",").map(Number);
for (const h of headSizes) if (h !== 64 && h !== 128) throw new Error(`--heads takes 64 and/or 128, not ${h}`);
const types = values.types!.split(",") as WeightType[];
for (const t of types) if (!TYPES.includes(t)) throw new Error(`--types takes ${TYPES.join(", ")}, not ${t}`);

/** The cell's model file: generated in F32, then quantized once by llama-quantize; cached in .cache/peer. */
function modelFile(size: Size, headSize: number, type: WeightType): string {
  const nHead = size.shape.nEmbd / headSize;
  // bench:peer's own files for the small shape (model.gguf is its 8 heads, model-h4.gguf its 4).
  const base = size.name === "small" ? (nHead === 8 ? "model" : `model-h${nHead}`) : `large-h${nHead}`;
  const f32 = ensurePeerModel(join(PEER_CACHE, `${base}.gguf`), { ...size.shape, nHead });
  if (type === "F32") return f32;
  return ensureQuantized(f32, join(PEER_CACHE, `${base}-${type}.gguf`), type, log);
}

interface PeerSeries {
  single: number[];
  concurrent: number[];
  concurrentAnswered: number[];
  cold: number[];
}
interface PeerJson {
  results: Array<{ threads: number; series: Record<"ours" | "llama-server", PeerSeries> }>;
}
interface Cell {
  size: Size["name"];
  headSize: number;
  type: WeightType;
  threads: number;
  ours: { single: number; concurrent: number; answered: number; coldMs: number };
  peer: { single: number; concurrent: number; answered: number; coldMs: number };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function runCell(size: Size, headSize: number, type: WeightType, work: string): Cell[] {
  const model = modelFile(size, headSize, type);
  const json = join(work, `${size.name}-${headSize}-${type}.json`);
  const args = [
    "--import", "tsx", join(ROOT, "bench", "peer.ts"),
    "--model", model, "--threads", values.threads!, "--rounds", values.rounds!, "--only", "single,concurrent,prompt",
    "--tokens", String(size.tokens), "--prompt-tokens", String(size.promptTokens), "--warmup-streams", String(size.warmupStreams),
    "--peer-args=-fa on -ctk f16 -ctv f16", "--json", json,
    ...(values["llama-server"] ? ["--llama-server", values["llama-server"]] : []),
  ];
  log(`\n== ${size.name}, heads of ${headSize}, ${type} (${model.replace(ROOT, "")})`);
  const r = spawnSync(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  if (r.status !== 0) throw new Error(`bench:peer failed on ${model} (exit ${r.status})`);
  const result = JSON.parse(readFileSync(json, "utf8")) as PeerJson;
  return result.results.map((t) => {
    const of = (s: PeerSeries) => ({ single: median(s.single), concurrent: median(s.concurrent), answered: median(s.concurrentAnswered), coldMs: median(s.cold) });
    return { size: size.name, headSize, type, threads: t.threads, ours: of(t.series.ours), peer: of(t.series["llama-server"]) };
  });
}

const MEASURES = [
  { key: "single", label: "one answer", ratio: (c: Cell) => c.ours.single / c.peer.single },
  { key: "concurrent", label: "four at once", ratio: (c: Cell) => c.ours.concurrent / c.peer.concurrent },
  { key: "answered", label: "four at once, all answered", ratio: (c: Cell) => c.ours.answered / c.peer.answered },
  { key: "cold", label: "cold prompt (TTFT, inverted)", ratio: (c: Cell) => c.peer.coldMs / c.ours.coldMs },
] as const;

function report(cells: Cell[]): string {
  const lines: string[] = [];
  const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");
  for (const size of sizes) {
    const mine = cells.filter((c) => c.size === size.name);
    if (mine.length === 0) continue;
    lines.push(`\n${size.label}; ${size.tokens}-token answers, ${size.promptTokens}-token cold prompt`, "");
    lines.push("| heads of | weights | threads | one answer | four at once | four, all answered | cold prompt | tokens/s ours / llama-server (one; four) |", "|---|---|---|---|---|---|---|---|");
    for (const c of mine)
      lines.push(
        `| ${c.headSize} | ${c.type} | ${c.threads} | **${f(MEASURES[0].ratio(c))}** | **${f(MEASURES[1].ratio(c))}** | **${f(MEASURES[2].ratio(c))}** | **${f(MEASURES[3].ratio(c))}** | ${f(c.ours.single, 1)} / ${f(c.peer.single, 1)}; ${f(c.ours.concurrent, 1)} / ${f(c.peer.concurrent, 1)} |`,
      );
  }
  lines.push("", "Worst ratio per measure (ours ÷ llama-server; higher is better):", "", "| measure | worst | where | best |", "|---|---|---|---|");
  for (const m of MEASURES) {
    const sorted = [...cells].sort((a, b) => m.ratio(a) - m.ratio(b));
    const worst = sorted[0]!;
    const best = sorted.at(-1)!;
    lines.push(`| ${m.label} | **${f(m.ratio(worst))}** | ${worst.size}, heads of ${worst.headSize}, ${worst.type}, threads ${worst.threads} | ${f(m.ratio(best))} |`);
  }
  return lines.join("\n");
}

const build = spawnSync("npm", ["run", "build"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
if (build.status !== 0) throw new Error("npm run build failed");
const work = mkdtempSync(join(tmpdir(), "svc-peer-matrix-"));
const cells: Cell[] = [];
const started = Date.now();
try {
  for (const size of sizes)
    for (const headSize of headSizes)
      for (const type of types) {
        if (size.name === "large" && type === "F32" && !values["large-f32"]) continue;
        cells.push(...runCell(size, headSize, type, work));
        // Kept as it goes: a run of an hour should not lose its finished cells to a later one's failure.
        if (values.json) writeFileSync(values.json, JSON.stringify(cells, null, 2));
      }
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(`\nbench:peer matrix, threads ${values.threads}, ${values.rounds} rounds a cell, ${Math.round((Date.now() - started) / 60_000)} minutes`);
console.log(report(cells));
if (values.json) writeFileSync(values.json, JSON.stringify(cells, null, 2));
