// Benchmark against the peer a user would otherwise pick: llama.cpp's own llama-server, built from the same
// llama.cpp source node-llama-cpp ships, on the same model file, with the same threads, slots and context.
// Both servers run side by side; every measure alternates between them, round after round, so machine drift
// hits both alike. Ratios are ours ÷ llama-server, higher is better (TTFT is inverted).
//
// Usage: npm run bench:peer [-- --model PATH.gguf] [--threads 1,2] [--rounds N] [--tokens N]
//                             [--llama-server PATH] [--svc PATH/bin/svc.js] [--json OUT.json]
//                             [--busy PERCENT] [--warmup-streams N (default 20)] [--single-answers N (default 5)] [--gpu cuda|vulkan]
//                             [--peer-args="LLAMA-SERVER OPTIONS"] (e.g. "-fa off": llama-server's flash
//                             attention as ours with an f16 KV cache) [--heads 8|4] (the generated model's
//                             heads: 64 or 128 values each; docs/performance.md, section 24)
// --busy runs another process for the whole run that keeps one core busy that share of the time (busy
// 10 ms out of every 10 / PERCENT × 100 ms; 100: all the time): the browser or build a user's laptop runs
// beside the server, and what spinning threads do then.
// --gpu runs both on that GPU backend, every layer offloaded (ours `--gpu BACKEND`, llama-server `-ngl 999`;
// its binary must be a build with that backend, given by --llama-server); the run stops if ours did not load
// the model onto it. bench/device/cuda-peer.sh and vulkan-peer.sh do this on a lent GPU machine.
// Not part of `npm test`. The first run builds llama-server (about 10+ minutes on 2 cores, cached in .cache/).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { engineBuildOptions, findEngineBuilds } from "../server/engine/engine-build.js";
import { chooseThreads } from "../server/engine/resource-plan.js";
import { freePort, gpuOption, offloadCheck, settle, stopProcess, wordsText } from "./common.js";
import { ensureLlamaServer, PEER_CACHE, ROOT } from "./llama-server-build.js";
import { ensurePeerModel, PEER_MODEL } from "./peer-model.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string" },
    rounds: { type: "string", default: "5" },
    tokens: { type: "string", default: "200" },
    slots: { type: "string", default: "4" },
    "context-size": { type: "string", default: "4096" },
    "prompt-tokens": { type: "string", default: "2000" },
    "llama-server": { type: "string" },
    /** Another build of ours to compare (its bin/svc.js), e.g. one using a locally built node-llama-cpp. */
    svc: { type: "string" },
    json: { type: "string" },
    only: { type: "string" },
    busy: { type: "string" },
    "warmup-streams": { type: "string", default: "20" },
    /**
     * Lone answers per round and server, alternated (ours, llama-server, llama-server, ours, ...). One answer of
     * 200 tokens lasts half a second here, and two in a row on this shared 2-vCPU machine differ by up to a
     * half: with one a round, the median of 3 to 5 rounds moved by 0.2 from run to run (docs/performance.md,
     * section 53).
     */
    "single-answers": { type: "string", default: "5" },
    gpu: { type: "string", default: "cpu" },
    /**
     * More llama-server options, space-separated, e.g. "-fa off" (its flash attention is "auto", on for the
     * CPU; ours is off with an f16 KV cache) or "-ctk q8_0 -ctv q8_0" (ours takes q8_0 only where it must).
     */
    "peer-args": { type: "string", default: "" },
    /**
     * Attention heads of the generated model (n_embd 512): 8 (head size 64, the default and the history's
     * model) or 4 (head size 128, as Llama 3 and Qwen3 have). Ignored with --model.
     */
    heads: { type: "string", default: "8" },
  },
});
const peerArgs = values["peer-args"]!.split(/\s+/).filter(Boolean);
const rounds = Number(values.rounds);
const tokens = Number(values.tokens);
const slots = Number(values.slots);
const contextSize = Number(values["context-size"]);
const promptTokens = Number(values["prompt-tokens"]);
const warmupStreams = Number(values["warmup-streams"]);
const singleAnswers = Number(values["single-answers"]);
const log = (line: string) => process.stderr.write(`${line}\n`);
const gpu = gpuOption(values.gpu!, values["llama-server"]);
const busyPercent = values.busy === undefined ? 0 : Number(values.busy);
if (!(busyPercent >= 0 && busyPercent <= 100)) throw new Error(`--busy takes a percentage from 0 to 100, not ${values.busy}`);

/** The competing process of --busy: a spin of 10 ms, then a sleep that makes the duty cycle. */
function startBusy(percent: number): ChildProcess | null {
  if (percent === 0) return null;
  const idleMs = percent >= 100 ? 0 : Math.round((10 * (100 - percent)) / percent);
  const code = `const tick = () => { const end = performance.now() + 10; while (performance.now() < end); ${idleMs > 0 ? `setTimeout(tick, ${idleMs})` : "setImmediate(tick)"}; }; tick();`;
  return spawn(process.execPath, ["-e", code], { stdio: "ignore" });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const load = () => loadavg().map((x) => x.toFixed(2)).join(" ");

// ---------------------------------------------------------------------------------------------------------
// Servers

interface Target {
  name: "ours" | "llama-server";
  url: string;
  headers: Record<string, string>;
  /** Extra body fields this server needs for the same request. */
  extra: Record<string, unknown>;
  /** The server's process id, to read its CPU time. */
  pid: number;
  /** Ours: which llama.cpp binaries it loaded (/health's gpu.build: prebuilt, or a local build). */
  build?: string;
  /** Ours: how it holds the weights (docs/performance.md, section 18), from its /proc/PID files. */
  weights?: string;
  stop(): Promise<void>;
}

/**
 * A server's process and its descendants, the server first (ours: the server and its engine process, which
 * holds the model and decodes); just the process where /proc is not there.
 */
function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      for (const tid of readdirSync(`/proc/${out[i]}/task`)) {
        const children = readFileSync(`/proc/${out[i]}/task/${tid}/children`, "utf8").trim();
        if (children) out.push(...children.split(/\s+/).map(Number));
      }
    } catch {
      // Ended, or not Linux.
    }
  }
  return out;
}

/** Whether a server maps the model file or holds it in its memory, and how much of that is in huge pages (Linux). */
function weightsOf(pid: number, model: string): string {
  try {
    const tree = processTree(pid);
    if (tree.some((p) => readFileSync(`/proc/${p}/maps`, "utf8").includes(model))) return "weights mapped from the file";
    // The process that holds them: the engine process (the last one started) for ours, the server for llama-server.
    const holder = tree.at(-1)!;
    const huge = /^AnonHugePages:\s+(\d+) kB/m.exec(readFileSync(`/proc/${holder}/smaps_rollup`, "utf8"));
    return `weights read into memory, ${Math.round(Number(huge?.[1] ?? 0) / 1024)} MiB of the process in huge pages`;
  } catch {
    return "weights: not known here";
  }
}

async function waitReady(url: string, headers: Record<string, string>, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}:\n${output()}`);
    const status = await new Promise<number>((resolve) => {
      const req = http.get(`${url}/v1/models`, { headers }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", () => resolve(0));
    });
    if (status === 200) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`server at ${url} not ready in time:\n${output()}`);
}

async function startOurs(model: string, threads: number): Promise<Target> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-peer-"));
  const bin = values.svc ?? join(ROOT, "bin", "svc.js");
  const created = spawnSync(process.execPath, [bin, "keys", "create", "--data-dir", dataDir, "--name", "bench"], { encoding: "utf8" });
  if (created.status !== 0) throw new Error(`svc keys create failed: ${created.stderr}`);
  const key = created.stdout.trim().split("\n").at(-1)!;
  const port = await freePort();
  const args = ["serve", "--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDir, "--model", model, "--threads", String(threads), "--sequences", String(slots), "--context-size", String(contextSize), "--gpu", gpu, "--log-level", "warn"];
  const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env } });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const headers = { authorization: `Bearer ${key}` };
  await waitReady(url, headers, child, () => out);
  // The bench's model has 8 layers; all of them and the output layer offloaded reads 9.
  const { health, problem } = await offloadCheck(url, headers, gpu, 9);
  if (problem !== null) {
    await stopProcess(child);
    throw new Error(`ours ${problem}\n${JSON.stringify(health)}\n${out}`);
  }
  if (gpu !== "cpu") log(`ours: ${gpu} on ${health.gpu?.devices?.join(", ")}, ${health.model?.gpu_layers} layers offloaded, ${health.gpu?.build} binaries`);
  return {
    name: "ours",
    url,
    headers,
    extra: { reasoning_effort: "none" },
    pid: child.pid!,
    build: health.gpu?.build ?? "unknown",
    weights: weightsOf(child.pid!, model),
    async stop() {
      await stopProcess(child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function startPeer(binary: string, model: string, threads: number): Promise<Target> {
  const port = await freePort();
  // Same threads (generation and prompt), same slots, same tokens per slot; everything else upstream's defaults.
  const args = ["-m", model, "--host", "127.0.0.1", "--port", String(port), "-t", String(threads), "-tb", String(threads), "-np", String(slots), "-c", String(slots * contextSize), "--no-webui", "--log-disable", ...(gpu === "cpu" ? [] : ["-ngl", "999"]), ...peerArgs];
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, {}, child, () => out);
  return {
    name: "llama-server",
    url,
    headers: {},
    // Same prompt as ours in fast mode (the template's enable_thinking=false); nothing stops before max_tokens.
    extra: { chat_template_kwargs: { enable_thinking: false } },
    pid: child.pid!,
    stop: () => stopProcess(child),
  };
}

// ---------------------------------------------------------------------------------------------------------
// Client: plain node:http with keep-alive, reading as little of each stream as it can.

// Streams open a connection each (llama-server hangs up on a keep-alive connection reused after a stream);
// the GET measure keeps its 8 connections alive on both servers.
const streamAgent = new http.Agent({ keepAlive: false, maxSockets: 64 });
const getAgent = new http.Agent({ keepAlive: true, maxSockets: 8 });

interface StreamResult {
  sent: number;
  first: number;
  end: number;
  completionTokens: number;
  promptTokens: number;
}

/**
 * A stream that sends nothing for this long fails the run, naming the server (a llama-server once sat at 93% of
 * a core after its warm-up and never answered; the bench waited forever).
 */
const STREAM_IDLE_MS = 120_000;

function streamChat(target: Target, messages: Array<{ role: string; content: string }>, maxTokens: number): Promise<StreamResult> {
  const body = JSON.stringify({
    model: "svc",
    messages,
    max_tokens: maxTokens,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
    ...target.extra,
  });
  return new Promise((resolve, reject) => {
    const sent = performance.now();
    const req = http.request(
      `${target.url}/v1/chat/completions`,
      { method: "POST", agent: streamAgent, headers: { ...target.headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        let first = 0;
        let tail = "";
        let status = res.statusCode ?? 0;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          // The first frame with generated text marks the first token.
          if (first === 0 && /"content":"[^"]/.test(chunk)) first = performance.now();
          tail = (tail + chunk).slice(-16384);
        });
        res.on("end", () => {
          const end = performance.now();
          if (status !== 200) return reject(new Error(`${target.name}: HTTP ${status}: ${tail.slice(0, 500)}`));
          const usageFrame = tail
            .split("\n")
            .filter((l) => l.startsWith("data: {") && l.includes('"usage"'))
            .map((l) => JSON.parse(l.slice(6)) as { usage?: { completion_tokens: number; prompt_tokens: number } | null })
            .find((c) => c.usage);
          if (!usageFrame?.usage) return reject(new Error(`${target.name}: no usage in the stream: ${tail.slice(-500)}`));
          resolve({ sent, first: first || end, end, completionTokens: usageFrame.usage.completion_tokens, promptTokens: usageFrame.usage.prompt_tokens });
        });
        res.on("error", reject);
      },
    );
    req.setTimeout(STREAM_IDLE_MS, () => req.destroy(new Error(`${target.name}: nothing on a stream for ${STREAM_IDLE_MS / 1000} s`)));
    req.on("error", reject);
    req.end(body);
  });
}

function getStatus(target: Target, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${target.url}${path}`, { agent: getAgent, headers: target.headers }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`${target.name} ${path}: HTTP ${res.statusCode}`))));
    });
    req.on("error", reject);
  });
}

// ---------------------------------------------------------------------------------------------------------
// Measures


let nonce = 1;
const question = (tag: string) => [{ role: "user", content: `${tag} ${wordsText(12, nonce++)}` }];

/**
 * Before a measure: a pause (common.ts settle: svc would count the other server's turn as another process's
 * load), and on a GPU a short answer: a GPU left idle (the other server's turn, the GET measure) clocks down,
 * and the first server of a round then measured the clock's ramp, not itself (on an H200 over Vulkan,
 * whichever server went first ran at half the speed of the second).
 */
async function preroll(t: Target): Promise<void> {
  await settle();
  if (gpu !== "cpu") await streamChat(t, question("pre-roll"), 16);
}

/** Decode rate of one stream: tokens after the first ÷ time after the first; and the server's CPU per token, by thread. */
async function singleStream(t: Target): Promise<{ rate: number; cpu: ThreadCpu[] }> {
  const cpuWindow = startCpuWindow(t.pid);
  const r = await streamChat(t, question("single"), tokens);
  if (r.completionTokens < tokens) throw new Error(`${t.name} stopped after ${r.completionTokens} of ${tokens} tokens`);
  return { rate: (r.completionTokens - 1) / ((r.end - r.first) / 1000), cpu: cpuWindow((seconds) => (seconds * 1000) / r.completionTokens) };
}

/**
 * Starts counting a server's CPU by thread; the function returned ends the window and gives each thread's
 * CPU seconds scaled by `per` (per token, per request). Threads that ended meanwhile (our solo runs'
 * threads) are only in the process's total: one entry for them.
 */
function startCpuWindow(pid: number): (per: (seconds: number) => number) => ThreadCpu[] {
  const before = threadCpu(pid);
  const cpuBefore = cpuSeconds(pid);
  return (per) => {
    const after = threadCpu(pid);
    const cpu: ThreadCpu[] = [];
    let live = 0;
    for (const [tid, a] of after) {
      const used = a.seconds - (before.get(tid)?.seconds ?? 0);
      live += used;
      cpu.push({ thread: a.name, ms: per(used) });
    }
    cpu.push({ thread: "threads that ended", ms: per(cpuSeconds(pid) - cpuBefore - live) });
    return cpu;
  };
}

/** CPU time of a thread (or a group of threads) of a server per unit: ms per streamed token, µs per GET request. */
interface ThreadCpu {
  thread: string;
  ms: number;
}

/**
 * Each thread's name and CPU seconds (user + system) so far, by thread id, over the server's process and its
 * descendants (ours: its engine process's threads are named "engine …"); empty where /proc is not there.
 */
function threadCpu(pid: number): Map<number, { name: string; seconds: number }> {
  const threads = new Map<number, { name: string; seconds: number }>();
  for (const p of processTree(pid)) {
    try {
      for (const tid of readdirSync(`/proc/${p}/task`)) {
        try {
          const stat = readFileSync(`/proc/${p}/task/${tid}/stat`, "utf8");
          const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
          threads.set(Number(tid), { name: `${p === pid ? "" : "engine "}${name}${Number(tid) === p ? " (main)" : ""}`, seconds: statCpuSeconds(stat) });
        } catch {
          // The thread ended between the listing and the read.
        }
      }
    } catch {
      // Not Linux, or the process ended.
    }
  }
  return threads;
}

/** Per thread name, the median over rounds of the CPU per unit; threads under `least` left out. */
function cpuByThread(rounds: ThreadCpu[][], digits = 2, least = 0.005): string {
  const byName = new Map<string, number[]>();
  for (const round of rounds) {
    const sums = new Map<string, number>();
    for (const { thread, ms } of round) sums.set(thread, (sums.get(thread) ?? 0) + ms);
    for (const [thread, ms] of sums) byName.set(thread, [...(byName.get(thread) ?? []), ms]);
  }
  return [...byName]
    .map(([thread, values]) => ({ thread, ms: median(values) }))
    .filter((x) => x.ms >= least)
    .sort((a, b) => b.ms - a.ms)
    .map((x) => `${x.thread} ${x.ms.toFixed(digits)}`)
    .join(", ");
}

/**
 * `slots` streams started together. `rate`: all tokens ÷ time from the first token to the last (the decode's
 * aggregate; a server that starts one stream while it still reads the others' prompts has that reading in
 * its window, one that reads all four prompts first has not). `answered`: all tokens ÷ time from sending
 * the four to the last token (what a client waiting for all four sees, prompts included).
 */
async function concurrentStreams(t: Target): Promise<{ rate: number; answered: number }> {
  const rs = await Promise.all(Array.from({ length: slots }, (_, i) => streamChat(t, question(`concurrent ${i}`), tokens)));
  const total = rs.reduce((a, r) => a + r.completionTokens, 0);
  const sent = Math.min(...rs.map((r) => r.sent));
  const first = Math.min(...rs.map((r) => r.first));
  const end = Math.max(...rs.map((r) => r.end));
  return { rate: (total - rs.length) / ((end - first) / 1000), answered: total / ((end - sent) / 1000) };
}

/** TTFT of a new ~2k-token prompt (nothing cached), then of a second question after the same prefix. */
async function promptEval(t: Target, seed: number): Promise<{ cold: number; warm: number; promptTokens: number }> {
  const prefix = wordsText(promptTokens, seed);
  const cold = await streamChat(t, [{ role: "system", content: prefix }, { role: "user", content: "first question" }], 4);
  const warm = await streamChat(t, [{ role: "system", content: prefix }, { role: "user", content: "second question" }], 4);
  return { cold: cold.first - cold.sent, warm: warm.first - warm.sent, promptTokens: cold.promptTokens };
}

/** CPU seconds (user + system) a server's processes have used so far; NaN where /proc is not there (not Linux). */
function cpuSeconds(pid: number): number {
  try {
    return processTree(pid).reduce((sum, p) => sum + statCpuSeconds(readFileSync(`/proc/${p}/stat`, "utf8")), 0);
  } catch {
    return Number.NaN;
  }
}
/** User + system CPU seconds from a /proc stat line (fields counted after the name, which may hold ") "). */
function statCpuSeconds(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}
const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

/**
 * GET /v1/models with 8 keep-alive clients for `ms` milliseconds: requests per second, and the server's CPU
 * time per request. The client shares the machine's cores, so requests/s also moves with how much CPU the
 * server leaves it; CPU per request is the server's own cost.
 */
async function modelsRps(t: Target, ms = 2000): Promise<{ rps: number; cpuUs: number; cpu: ThreadCpu[] }> {
  const started = performance.now();
  const cpuWindow = startCpuWindow(t.pid);
  let done = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (performance.now() - started < ms) {
        await getStatus(t, "/v1/models");
        done++;
      }
    }),
  );
  const rps = done / ((performance.now() - started) / 1000);
  // The threads' shares add up to the process's total (the threads that ended are one of them).
  const cpu = cpuWindow((seconds) => (seconds * 1e6) / done);
  return { rps, cpuUs: cpu.reduce((sum, c) => sum + c.ms, 0), cpu };
}

interface Series {
  single: number[];
  concurrent: number[];
  concurrentAnswered: number[];
  cold: number[];
  warm: number[];
  models: number[];
  modelsCpuUs: number[];
  promptTokens: number[];
  singleCpu: ThreadCpu[][];
  modelsCpu: ThreadCpu[][];
}
const emptySeries = (): Series => ({ single: [], concurrent: [], concurrentAnswered: [], cold: [], warm: [], models: [], modelsCpuUs: [], promptTokens: [], singleCpu: [], modelsCpu: [] });

async function measureThreads(binary: string, model: string, threads: number) {
  log(`threads ${threads}: starting both servers (load ${load()})`);
  const ours = await startOurs(model, threads);
  const peer = await startPeer(binary, model, threads);
  const series = { ours: emptySeries(), "llama-server": emptySeries() } as Record<Target["name"], Series>;
  const loads: string[] = [load()];
  const only = values.only?.split(",");
  const want = (m: string) => !only || only.includes(m);
  try {
    // Warm-up: first requests pay for allocations, page faults of the weights and template compilation.
    for (const t of [ours, peer]) {
      log(`warm-up ${t.name}`);
      // A server runs for hours: measure its steady state. Each token passes a chain of async generators,
      // which V8 optimises only after some thousands of tokens: over the first 40 streams of 200 tokens our
      // JavaScript thread's time per token fell from 0.30 to 0.19 ms (docs/performance.md, section 16).
      for (let i = 0; i < warmupStreams; i++) await singleStream(t);
      await concurrentStreams(t);
      // V8 needs a few thousand requests (about 3 s here) before the route runs optimised code; untouched,
      // the first second measured JIT, not serving.
      if (want("models")) await modelsRps(t, 5000);
    }
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? [ours, peer] : [peer, ours];
      for (let answer = 0; want("single") && answer < singleAnswers; answer++) {
        for (const t of answer % 2 === 0 ? order : [...order].reverse()) {
          await preroll(t);
          const r = await singleStream(t);
          series[t.name].single.push(r.rate);
          series[t.name].singleCpu.push(r.cpu);
        }
      }
      for (const t of order) {
        if (!want("concurrent")) continue;
        await preroll(t);
        const c = await concurrentStreams(t);
        series[t.name].concurrent.push(c.rate);
        series[t.name].concurrentAnswered.push(c.answered);
      }
      for (const t of order) {
        if (!want("prompt")) continue;
        await preroll(t);
        const p = await promptEval(t, 1000 * threads + 10 * round + (t === ours ? 1 : 2));
        series[t.name].cold.push(p.cold);
        series[t.name].warm.push(p.warm);
        series[t.name].promptTokens.push(p.promptTokens);
      }
      for (const t of order) {
        if (!want("models")) continue;
        const r = await modelsRps(t);
        series[t.name].models.push(r.rps);
        series[t.name].modelsCpuUs.push(r.cpuUs);
        series[t.name].modelsCpu.push(r.cpu);
      }
      loads.push(load());
      log(`threads ${threads}: round ${round + 1}/${rounds} done (load ${load()})`);
    }
  } finally {
    await ours.stop();
    await peer.stop();
  }
  return { threads, series, loads, build: ours.build, weights: ours.weights };
}

// ---------------------------------------------------------------------------------------------------------
// Report

type Result = Awaited<ReturnType<typeof measureThreads>>;

function report(results: Result[]): string {
  const lines: string[] = [];
  const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");
  const head = `| Measure | ${results.map((r) => `threads ${r.threads}`).join(" | ")} |`;
  lines.push(head, `|---|${results.map(() => "---").join("|")}|`);
  const row = (label: string, cell: (r: Result) => string) => lines.push(`| ${label} | ${results.map(cell).join(" | ")} |`);
  const m = (r: Result, who: Target["name"], k: Exclude<keyof Series, "singleCpu" | "modelsCpu">) => median(r.series[who][k]);
  const ratioCell = (r: Result, k: Exclude<keyof Series, "singleCpu" | "modelsCpu">, unit: string, invert = false, digits = 1) => {
    const a = m(r, "ours", k);
    const b = m(r, "llama-server", k);
    const ratio = invert ? b / a : a / b;
    return `**${fmt(ratio, 2)}** (${fmt(a, digits)}${unit} vs ${fmt(b, digits)}${unit})`;
  };
  row("single-stream decode tokens/s", (r) => ratioCell(r, "single", ""));
  row(`${slots} concurrent streams, aggregate tokens/s`, (r) => ratioCell(r, "concurrent", ""));
  row(`${slots} concurrent streams, all answered: tokens ÷ time from sending to the last token`, (r) => ratioCell(r, "concurrentAnswered", ""));
  row(`own ${slots}-stream aggregate ÷ own single stream`, (r) => {
    const ours = m(r, "ours", "concurrent") / m(r, "ours", "single");
    const peer = m(r, "llama-server", "concurrent") / m(r, "llama-server", "single");
    return `ours ${fmt(ours, 2)}, llama-server ${fmt(peer, 2)} (**${fmt(ours / peer, 2)}**)`;
  });
  row(`prompt evaluation, ~${promptTokens}-token cold prompt (TTFT, inverted)`, (r) => ratioCell(r, "cold", " ms", true, 0));
  row(`TTFT warm ÷ cold with the prefix cached`, (r) => {
    const ours = m(r, "ours", "warm") / m(r, "ours", "cold");
    const peer = m(r, "llama-server", "warm") / m(r, "llama-server", "cold");
    return `ours ${fmt(ours, 3)}, llama-server ${fmt(peer, 3)}`;
  });
  row("GET /v1/models requests/s", (r) => ratioCell(r, "models", "", false, 0));
  row("GET /v1/models server CPU per request (inverted)", (r) => ratioCell(r, "modelsCpuUs", " µs", true, 1));
  lines.push("");
  lines.push("Ratios are ours ÷ llama-server (TTFT: llama-server ÷ ours); higher is better. Medians of the rounds.");
  for (const r of results) {
    const pt = `${median(r.series.ours.promptTokens)} vs ${median(r.series["llama-server"].promptTokens)}`;
    const pairs = r.series.ours.single.map((x, i) => x / r.series["llama-server"].single[i]!);
    lines.push(
      `threads ${r.threads}: prompt tokens ${pt}; single-stream ratio per pair of answers ${pairs.map((x) => x.toFixed(2)).join(" ")}; load average per round ${r.loads.map((l) => l.split(" ")[0]).join(", ")}`,
    );
    if (r.series.ours.singleCpu.length > 0)
      lines.push(
        `threads ${r.threads}: single stream, server CPU ms per token by thread: ours ${cpuByThread(r.series.ours.singleCpu)}; llama-server ${cpuByThread(r.series["llama-server"].singleCpu)}`,
      );
    if (r.series.ours.modelsCpu.length > 0)
      lines.push(
        `threads ${r.threads}: GET /v1/models, server CPU µs per request by thread: ours ${cpuByThread(r.series.ours.modelsCpu, 1, 0.5)}; llama-server ${cpuByThread(r.series["llama-server"].modelsCpu, 1, 0.5)}`,
      );
  }
  return lines.join("\n");
}

const binary = values["llama-server"] ?? ensureLlamaServer(log);
const heads = Number(values.heads);
if (!(heads === 8 || heads === 4)) throw new Error(`--heads takes 8 or 4, not ${values.heads}`);
const model = values.model ?? ensurePeerModel(join(PEER_CACHE, heads === 8 ? "model.gguf" : `model-h${heads}.gguf`), { ...PEER_MODEL, nHead: heads });
// llama.cpp's F16 dot product handles 128 values a loop with AVX512-FP16 and the rest one by one: on such a
// CPU a llama-server built with -march=native (as this bench builds it) takes the attention's dot products of
// 64-value heads in that scalar tail (docs/performance.md, section 24; at the server level it did not show
// in its CPU per token there, but say so).
if (!values.model && heads === 8 && /\bavx512_fp16\b/.test((() => { try { return readFileSync("/proc/cpuinfo", "utf8"); } catch { return ""; } })()))
  log("note: this CPU has AVX512-FP16: llama-server's -march=native build takes the F16 dot products of this model's 64-value heads in a scalar tail (docs/performance.md, section 24); --heads 4 for heads of 128, the shape of most current models");
// What `svc serve` picks for this model without --threads (its decodes on one libuv pool thread).
const svcDefault = chooseThreads({ cores: availableParallelism(), modelBytes: statSync(model).size, poolThreads: 1, offload: gpu === "cpu" ? "none" : "full" });
// Default: 1 thread, the server's own default and every core (the issue's columns), each once.
const threadCounts = [...new Set((values.threads ?? `1,${svcDefault},${availableParallelism()}`).split(",").map((s) => Number(s.trim())))];
const cpu = cpus()[0]?.model ?? "unknown CPU";
log(`llama-server ${binary}${peerArgs.length ? ` (with ${peerArgs.join(" ")})` : ""}\nmodel ${model}\n${availableParallelism()} cores (${cpu}); threads ${threadCounts.join(", ")}; ${rounds} rounds; ${tokens} tokens; ${slots} slots of ${contextSize}`);
const busy = startBusy(busyPercent);
process.on("exit", () => busy?.kill());
const results: Result[] = [];
try {
  for (const threads of threadCounts) results.push(await measureThreads(binary, model, threads));
} finally {
  busy?.kill();
}
const text = report(results);
// The server loads `svc engine build`'s build first when it is there (with the patches it names), else another local build.
const engineBuild = (await findEngineBuilds()).some((b) => b.current && !b.building);
const localBuild = engineBuild ? `\`svc engine build\`'s binaries (build ${engineBuildOptions().SVC_BUILD_ID})` : "node-llama-cpp's local build";
console.log(`\n${availableParallelism()} cores (${cpu}), model ${model.replace(ROOT, "")}, ${rounds} rounds, ${tokens}-token greedy answers, ${slots} slots of ${contextSize} tokens; default threads ${svcDefault};${busyPercent > 0 ? ` another process busy on one core ${busyPercent}% of the time;` : ""} ours on ${[...new Set(results.map((r) => (r.build === "local" ? localBuild : `node-llama-cpp's ${r.build} binaries`)))].join(", ")}, ${[...new Set(results.map((r) => r.weights))].join(", ")}\n`);
console.log(text);
if (values.json) writeFileSync(values.json, JSON.stringify({ cores: availableParallelism(), cpu, model, rounds, tokens, slots, contextSize, results }, null, 2));
streamAgent.destroy();
getAgent.destroy();
