// Speculative decoding benchmark (issue 44): tokens/s with speculation on ÷ off on svc, and svc (on) ÷
// llama.cpp's llama-server with its n-gram speculation, on the same model file, threads, slots and context.
//
// Workloads (--workloads, default echo,norepeat):
//   echo      the echo model (bench/spec-model.ts), whose greedy answer is a fixed chain of tokens whatever
//             the prompt. First one answer of --tokens tokens is asked for (text A); each measured request is
//             then "rewrite this file with one change" quoting A, and its answer is A again: prompt lookup can
//             draft all of it (acceptance high by construction). Goals: on ÷ off ≥ 1.8, on ÷ llama-server ≥ 1.0.
//   tool      the echo request with a forced call to write_file({content}): the call's arguments (a grammar
//             phase) hold the quoted file again: the file is what a first forced call wrote into its
//             `content` (the model's chain from the string's opening quote, JSON escapes as written). Shows
//             speculation under a grammar; svc's answers on and off must agree (no chain to match: JSON).
//   edit      the tool workload with the file quoted as it is (real line breaks, as a Read tool's result holds
//             it) while the call writes it escaped (`\n`): a coding agent's Write call. Prompt lookup reads the
//             conversation as a JSON string quotes it too, so its guesses go on across the escapes.
//   norepeat  the same model with a prompt that does not hold its chain: an answer shorter than the chain's
//             period (169 tokens) never repeats itself or the prompt, so nothing drafted can be accepted.
//             Goal: on ÷ off ≥ 0.97 (what speculation costs when it cannot help).
//   peer      bench:peer's random-weights model (bench/peer-model.ts) with a short question. Not "nothing to
//             repeat": its greedy text falls into loops ("short short short ..."), which prompt lookup drafts.
//   draft     a draft model (--draft-model): bench:peer's model whose layers past the second are zeros (they
//             cost their compute and add nothing), and as its draft the model of those two layers alone, about
//             5 times as fast, which writes the same text (the output matrix is scaled so that the chosen
//             token is nearly sure: greedy text unchanged, few drafts cut short by the 0.6 cutoff). svc on
//             runs with SVC_DRAFT_MODEL, llama-server with -md DRAFT --spec-type draft-simple (its draft-model
//             speculation, its own defaults otherwise: --peer-args "--spec-draft-n-max 16" matches svc's most).
// Each in one stream, then --sequences streams at once (aggregate tokens/s from the first token to the last,
// and "all answered": every token ÷ the time from sending them, as bench:peer prints; the first counts a
// server that starts one answer before reading the other prompts against it). Servers, all loopback:
//   svc off   `svc serve` with SVC_SPECULATION=off
//   svc on    `svc serve` with SVC_SPECULATION unset (its default, prompt lookup)
//   llama     llama-server with --peer-spec (default --spec-type ngram-simple, upstream's n-gram sizes)
//   llama off llama-server without speculation (only with --peer-off)
// Every measure alternates the servers' order round after round, so machine drift hits all alike, after a
// pause (common.ts settle: svc would count the server before it as another process's load). Requests
// are greedy (temperature 0) with max_tokens fixed; neither model ever ends its turn early. Every answer of
// svc on is compared with svc off's answer to the same prompt (lossless: byte-identical), and on the echo
// model every answer with the text the model is built to write; a mismatch prints a MISMATCH line.
// Also printed, where the servers report them: svc's usage.completion_tokens_details.accepted_prediction_tokens
// and rejected_prediction_tokens, svc's /health speculation, and llama-server's timings.draft_n and
// draft_n_accepted.
//
// Usage: npm run bench:spec [-- --threads 1,2] [--rounds N (3)] [--tokens N (128)] [--sequences N (4)]
//                             [--workloads echo,tool,edit,norepeat,peer,draft] [--warmup-streams N (1)] [--single-answers N (3)] [--json OUT.json]
//                             [--llama-server PATH] [--svc PATH/bin/svc.js] [--peer-spec "LLAMA-SERVER OPTIONS"]
//                             [--peer-args "MORE LLAMA-SERVER OPTIONS"] [--peer-off] [--no-peer] [--weights f32|q8_0|q4_k_m]
//                             [--gpu cuda|vulkan]
// --gpu runs both servers on that GPU backend, every layer offloaded (svc `--gpu BACKEND`, llama-server `-ngl 999`,
// and `-ngld 999` for a draft model), as bench:peer's --gpu does; it needs --llama-server, one built with that
// backend (bench/device/ builds and runs it on a lent GPU machine).
// Not part of `npm test`. Builds llama-server the first time as bench:peer does (cached in .cache/peer).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { chooseThreads } from "../server/engine/resource-plan.js";
import { freePort, gpuOption, offloadCheck, settle, stopProcess, wordsText } from "./common.js";
import { ensureLlamaServer, ensureQuantized, PEER_CACHE, ROOT } from "./llama-server-build.js";
import { ensurePeerModel, PEER_MODEL } from "./peer-model.js";
import { ECHO_MODEL, ECHO_PERIOD, echoAnswer, ensureEchoModel } from "./spec-model.js";

const { values } = parseArgs({
  options: {
    threads: { type: "string" },
    rounds: { type: "string", default: "3" },
    tokens: { type: "string", default: "128" },
    sequences: { type: "string", default: "4" },
    "context-size": { type: "string", default: "4096" },
    workloads: { type: "string", default: "echo,norepeat" },
    "warmup-streams": { type: "string", default: "1" },
    /**
     * Lone answers a round from each server, each with its own prompt, the servers' order rotated from one to
     * the next. A 128-token answer lasts a third of a second here, and one a round left a run's median of the
     * lone answer 0.74 to 1.11 by the round (docs/performance.md, section 53).
     */
    "single-answers": { type: "string", default: "3" },
    "llama-server": { type: "string" },
    svc: { type: "string" },
    json: { type: "string" },
    /** llama-server's speculation options, space-separated. */
    "peer-spec": { type: "string", default: "--spec-type ngram-simple" },
    /** More llama-server options for both of its runs, e.g. "-fa off". */
    "peer-args": { type: "string", default: "" },
    /** Also measure llama-server without speculation (its own on ÷ off). */
    "peer-off": { type: "boolean", default: false },
    /** svc only: no llama-server. */
    "no-peer": { type: "boolean", default: false },
    /**
     * The echo model's weights: f32 (default); q8_0 (the blocks' matrices in Q8_0, written by the GGUF writer);
     * q4_k_m (the F32 model quantized by llama.cpp's llama-quantize, embedding and output too: the format users
     * run, built the first time with bench:peer's llama.cpp build).
     */
    weights: { type: "string", default: "f32" },
    gpu: { type: "string", default: "cpu" },
  },
});
const gpu = gpuOption(values.gpu!, values["llama-server"], !values["no-peer"]);
/** Said in the bench's header lines. */
const onGpu = gpu === "cpu" ? "" : `, ${gpu}, every layer offloaded`;
const rounds = Number(values.rounds);
const tokens = Number(values.tokens);
const sequences = Number(values.sequences);
const contextSize = Number(values["context-size"]);
const warmupStreams = Number(values["warmup-streams"]);
const singleAnswers = Number(values["single-answers"]);
const peerSpec = values["peer-spec"]!.split(/\s+/).filter(Boolean);
const peerArgs = values["peer-args"]!.split(/\s+/).filter(Boolean);
const log = (line: string) => process.stderr.write(`${line}\n`);

type Workload = "echo" | "tool" | "edit" | "norepeat" | "peer" | "draft";
const WORKLOADS: Record<Workload, string> = {
  echo: "echo (rewrite a quoted file)",
  tool: "tool call (write the quoted file back)",
  edit: "tool call (write back a file quoted as it is)",
  norepeat: "nothing to repeat",
  peer: "peer model (loops)",
  draft: "draft model (5x cheaper, same text)",
};
const workloads = values.workloads!.split(",").map((s) => s.trim()) as Workload[];
for (const w of workloads) if (!(w in WORKLOADS)) throw new Error(`--workloads takes echo, tool, edit, norepeat, peer and draft, not ${w}`);
if (workloads.includes("norepeat") && tokens >= ECHO_PERIOD)
  log(`note: --tokens ${tokens} is not under the echo model's period (${ECHO_PERIOD}): the norepeat answers repeat themselves after ${ECHO_PERIOD} tokens`);

const median = (xs: number[]) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const load = () => loadavg()[0]!.toFixed(2);

// ---------------------------------------------------------------------------------------------------------
// Servers

type ServerName = "svc off" | "svc on" | "llama" | "llama off";

interface Target {
  name: ServerName;
  url: string;
  headers: Record<string, string>;
  /** Extra body fields this server needs for the same prompt (the template's enable_thinking=false). */
  extra: Record<string, unknown>;
  stop(): Promise<void>;
}

async function waitReady(url: string, headers: Record<string, string>, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}:\n${output()}`);
    const status = await fetch(`${url}/v1/models`, { headers }).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`server at ${url} not ready in time:\n${output()}`);
}

async function startSvc(name: "svc off" | "svc on", model: string, threads: number, draftModel?: string): Promise<Target> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-spec-"));
  const bin = values.svc ?? join(ROOT, "bin", "svc.js");
  const created = spawnSync(process.execPath, [bin, "keys", "create", "--data-dir", dataDir, "--name", "bench"], { encoding: "utf8" });
  if (created.status !== 0) throw new Error(`svc keys create failed: ${created.stderr}`);
  const key = created.stdout.trim().split("\n").at(-1)!;
  const port = await freePort();
  const args = ["serve", "--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDir, "--model", model, "--threads", String(threads), "--sequences", String(sequences), "--context-size", String(contextSize), "--gpu", gpu, "--log-level", "warn"];
  // "svc on" runs svc's default: the variable unset, whatever this shell exports.
  const env = { ...process.env };
  if (name === "svc off") env.SVC_SPECULATION = "off";
  else delete env.SVC_SPECULATION;
  delete env.SVC_DRAFT_MODEL;
  if (name === "svc on" && draftModel) env.SVC_DRAFT_MODEL = draftModel;
  const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"], env });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const headers = { authorization: `Bearer ${key}` };
  await waitReady(url, headers, child, () => out);
  // The model on the GPU (all of it: these small models always fit), or the comparison is not the one asked for.
  const { problem } = await offloadCheck(url, headers, gpu, 1);
  if (problem !== null) {
    await stopProcess(child);
    throw new Error(`${name} ${problem}\n${out}`);
  }
  return {
    name,
    url,
    headers,
    extra: { reasoning_effort: "none" },
    async stop() {
      await stopProcess(child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function startLlama(name: "llama" | "llama off", binary: string, model: string, threads: number, draftModel?: string): Promise<Target> {
  const port = await freePort();
  // Same threads (generation and prompt), slots and tokens per slot as svc; bench:peer's flags plus --jinja.
  const args = ["-m", model, "--host", "127.0.0.1", "--port", String(port), "-t", String(threads), "-tb", String(threads), "-np", String(sequences), "-c", String(sequences * contextSize), "--jinja", "--no-webui", "--log-disable", ...(gpu === "cpu" ? [] : ["-ngl", "999"]), ...(name === "llama" ? (draftModel ? ["-md", draftModel, "--spec-type", "draft-simple", "-td", String(threads), ...(gpu === "cpu" ? [] : ["-ngld", "999"])] : peerSpec) : []), ...peerArgs];
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, {}, child, () => out);
  return { name, url, headers: {}, extra: { chat_template_kwargs: { enable_thinking: false } }, stop: () => stopProcess(child) };
}

// ---------------------------------------------------------------------------------------------------------
// Client

// A connection per stream (llama-server hangs up on a keep-alive connection reused after a stream).
const agent = new http.Agent({ keepAlive: false, maxSockets: 64 });

interface Answer {
  text: string;
  sent: number;
  first: number;
  end: number;
  completionTokens: number;
  /** svc: usage.completion_tokens_details, when it has them. */
  accepted?: number;
  rejected?: number;
  /** llama-server: timings.draft_n and draft_n_accepted, when it drafted. */
  draftN?: number;
  draftAccepted?: number;
}

type Messages = Array<{ role: string; content: string }>;

/** A greedy streamed chat answer of max_tokens tokens: its text, when its first text came, and its usage. */
function streamChat(target: Target, messages: Messages, maxTokens: number, extra: Record<string, unknown> = {}): Promise<Answer> {
  const body = JSON.stringify({ model: "svc", messages, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true }, ...target.extra, ...extra });
  return new Promise((resolve, reject) => {
    const sent = performance.now();
    const req = http.request(
      `${target.url}/v1/chat/completions`,
      { method: "POST", agent, headers: { ...target.headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        const answer: Answer = { text: "", sent, first: 0, end: 0, completionTokens: 0 };
        let pending = "";
        let raw = "";
        res.setEncoding("utf8");
        const frame = (line: string) => {
          if (!line.startsWith("data: {")) return;
          const chunk = JSON.parse(line.slice(6)) as {
            choices?: Array<{ delta?: { content?: string | null; tool_calls?: Array<{ function?: { arguments?: string } }> } }>;
            usage?: { completion_tokens: number; completion_tokens_details?: { accepted_prediction_tokens?: number; rejected_prediction_tokens?: number } } | null;
            timings?: { draft_n?: number; draft_n_accepted?: number };
          };
          // A tool call's arguments are its text (the tool workload).
          const content = chunk.choices?.[0]?.delta?.content || chunk.choices?.[0]?.delta?.tool_calls?.[0]?.function?.arguments;
          if (content) {
            if (answer.first === 0) answer.first = performance.now();
            answer.text += content;
          }
          if (chunk.usage) {
            answer.completionTokens = chunk.usage.completion_tokens;
            const d = chunk.usage.completion_tokens_details;
            if (d?.accepted_prediction_tokens !== undefined) answer.accepted = d.accepted_prediction_tokens;
            if (d?.rejected_prediction_tokens !== undefined) answer.rejected = d.rejected_prediction_tokens;
          }
          if (chunk.timings?.draft_n !== undefined) {
            answer.draftN = chunk.timings.draft_n;
            answer.draftAccepted = chunk.timings.draft_n_accepted ?? 0;
          }
        };
        res.on("data", (data: string) => {
          if (res.statusCode !== 200) return void (raw += data);
          pending += data;
          const lines = pending.split("\n");
          pending = lines.pop()!;
          for (const line of lines) frame(line);
        });
        res.on("end", () => {
          answer.end = performance.now();
          if (res.statusCode !== 200) return reject(new Error(`${target.name}: HTTP ${res.statusCode}: ${raw.slice(0, 500)}`));
          frame(pending);
          if (answer.completionTokens === 0) return reject(new Error(`${target.name}: no usage in the stream`));
          if (answer.completionTokens < maxTokens) return reject(new Error(`${target.name} stopped after ${answer.completionTokens} of ${maxTokens} tokens`));
          answer.first ||= answer.end;
          resolve(answer);
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** svc's /health speculation ({ mode, drafted_tokens, accepted_tokens, acceptance_rate }), when it has one. */
async function speculationOf(t: Target): Promise<Record<string, unknown> | null> {
  const health = (await (await fetch(`${t.url}/health`, { headers: t.headers })).json()) as { speculation?: Record<string, unknown>; model?: { speculation?: Record<string, unknown> } };
  return health.speculation ?? health.model?.speculation ?? null;
}

// ---------------------------------------------------------------------------------------------------------
// Prompts. The vocabulary spells running text one character a token (it has no pieces below whole words).


/**
 * The prompt of a workload; `tag` makes each request of a round its own (the same for every server, so their
 * answers can be compared), after the quoted file so that the servers' prefix caches keep the file.
 */
function prompt(workload: Workload, echoText: string, tag: string, seed: number): Messages {
  switch (workload) {
    case "echo":
    case "tool":
    case "edit":
      return [
        { role: "system", content: "You edit files. Reply with the whole edited file and nothing else." },
        { role: "user", content: `Rewrite this file with one change: keep every line as it is, except fix the typo if you find one.\n\n\`\`\`\n${echoText}\n\`\`\`\n\n(${tag})` },
      ];
    case "norepeat":
      return [{ role: "user", content: `Write something new about these notes. ${wordsText(200, seed)} (${tag})` }];
    case "peer":
    case "draft":
      return [{ role: "user", content: `${tag} ${wordsText(12, seed)}` }];
  }
}

/**
 * What a workload adds to the request: the tool workload forces a call to write_file, whose `content` (a JSON
 * string: a grammar phase, with the UTF-8 guard over the chain's multi-byte letters) is the quoted file again.
 */
function bodyOf(workload: Workload): Record<string, unknown> {
  if (workload !== "tool" && workload !== "edit") return {};
  const writeFile = { type: "function", function: { name: "write_file", description: "Writes the file.", parameters: { type: "object", properties: { content: { type: "string" } }, required: ["content"] } } };
  return { tools: [writeFile], tool_choice: { type: "function", function: { name: "write_file" } } };
}

// ---------------------------------------------------------------------------------------------------------
// Measures

interface Series {
  /** Tokens/s of one stream: tokens after the first ÷ time after the first. */
  single: number[];
  /** Aggregate tokens/s of `sequences` streams started together: tokens after each one's first ÷ the window from the first token to the last. */
  concurrent: number[];
  /**
   * The same streams, all answered: every token ÷ the time from sending them to the last token (bench:peer's
   * measure of the same name). The window above counts a server that starts its first answer before it has
   * read the other prompts against it; a server that reads all four prompts first (llama-server) is not.
   */
  concurrentAnswered: number[];
  answers: Answer[];
}
type Results = Record<Workload, Partial<Record<ServerName, Series>>>;
type Measure = "single" | "concurrent" | "concurrentAnswered";

const mismatches: string[] = [];
let comparedAnswers = 0;

/** Lossless: svc on's text equals svc off's for the same prompt; on the echo model, every text is the chain. */
function check(workload: Workload, what: string, texts: Partial<Record<ServerName, string[]>>): void {
  const expected = workload === "echo" || workload === "norepeat" ? echoAnswer(tokens) : null;
  const where = (i: number) => `${WORKLOADS[workload]}, ${what}${texts["svc off"]!.length > 1 ? `, stream ${i + 1}` : ""}`;
  const diff = (a: string, b: string) => {
    let i = 0;
    while (i < a.length && a[i] === b[i]) i++;
    return `first difference at character ${i}: ${JSON.stringify(a.slice(i, i + 24))} vs ${JSON.stringify(b.slice(i, i + 24))}`;
  };
  texts["svc on"]?.forEach((on, i) => {
    const off = texts["svc off"]![i]!;
    comparedAnswers++;
    if (on !== off) mismatches.push(`MISMATCH: svc with speculation on wrote another text than with it off (${where(i)}); ${diff(on, off)}`);
  });
  if (expected === null) return;
  for (const [name, list] of Object.entries(texts))
    list!.forEach((text, i) => {
      if (text !== expected) mismatches.push(`MISMATCH: ${name} did not write the echo model's chain (${where(i)}); ${diff(text, expected)}`);
    });
}

async function single(t: Target, messages: Messages, extra: Record<string, unknown> = {}): Promise<{ rate: number; answer: Answer }> {
  const answer = await streamChat(t, messages, tokens, extra);
  return { rate: (answer.completionTokens - 1) / ((answer.end - answer.first) / 1000), answer };
}

async function concurrent(t: Target, messages: Messages[], extra: Record<string, unknown> = {}): Promise<{ rate: number; answered: number; answers: Answer[] }> {
  const sent = performance.now();
  const answers = await Promise.all(messages.map((m) => streamChat(t, m, tokens, extra)));
  const total = sum(answers.map((a) => a.completionTokens));
  const first = Math.min(...answers.map((a) => a.first));
  const end = Math.max(...answers.map((a) => a.end));
  return { rate: (total - answers.length) / ((end - first) / 1000), answered: total / ((end - sent) / 1000), answers };
}

interface GroupResult {
  threads: number;
  results: Results;
  speculation: Partial<Record<ServerName, { before: Record<string, unknown> | null; after: Record<string, unknown> | null }>>;
  echoText: string | null;
  loads: string[];
}

/** One model's workloads at one thread count: start the servers, warm them, then the alternated rounds. */
async function measureGroup(binary: string, model: string, group: Workload[], threads: number, draftModel?: string): Promise<GroupResult> {
  log(`threads ${threads}, ${group.join(" + ")}: starting the servers on ${model.replace(ROOT, "")} (load ${load()})`);
  const servers: Target[] = [];
  const results = Object.fromEntries(group.map((w) => [w, {}])) as Results;
  const speculation: GroupResult["speculation"] = {};
  const loads = [load()];
  try {
    servers.push(await startSvc("svc off", model, threads), await startSvc("svc on", model, threads, draftModel));
    if (!values["no-peer"]) {
      servers.push(await startLlama("llama", binary, model, threads, draftModel));
      if (values["peer-off"]) servers.push(await startLlama("llama off", binary, model, threads));
    }
    for (const w of group) for (const t of servers) results[w][t.name] = { single: [], concurrent: [], concurrentAnswered: [], answers: [] };

    // The text the echo workload quotes: svc's answer (speculation off) to anything.
    let echoText = "";
    if (group.includes("echo") || group.includes("tool") || group.includes("edit") || group.includes("norepeat")) {
      echoText = (await streamChat(servers[0]!, [{ role: "user", content: "Say anything." }], tokens)).text;
      const built = echoAnswer(tokens);
      if (echoText === built) log(`the echo model's answer is its chain, as built (${tokens} tokens, ${echoText.length} characters)`);
      else mismatches.push(`MISMATCH: the echo model's first answer is not the chain it was built to write:\n  got  ${JSON.stringify(echoText)}\n  want ${JSON.stringify(built)}`);
    }

    // The text the tool workload quotes: svc's arguments (speculation off) to a forced call, as written (JSON
    // escapes and all), less the opening `{"content":"`: the arguments of every measured call are that again.
    let toolText = "";
    if (group.includes("tool") || group.includes("edit")) toolText = (await streamChat(servers[0]!, [{ role: "user", content: "Say anything." }], tokens, bodyOf("tool"))).text.replace(/^\{\s*"content"\s*:\s*"/, "");
    // The edit workload's file as it is: the escapes read (a backslash the end cut off left out).
    const rawFile = (): string => JSON.parse(`"${toolText.replace(/(?<!\\)((?:\\\\)*)\\$/, "$1")}"`) as string;
    const quoted = (w: Workload) => (w === "tool" ? toolText : w === "edit" ? rawFile() : echoText);

    for (const t of servers) if (t.name.startsWith("svc")) speculation[t.name] = { before: await speculationOf(t), after: null };
    for (const t of servers) {
      log(`warm-up ${t.name}`);
      for (const w of group) {
        for (let i = 0; i < warmupStreams; i++) await single(t, prompt(w, quoted(w), `warm-up ${i}`, 900 + i), bodyOf(w));
        await concurrent(t, Array.from({ length: sequences }, (_, i) => prompt(w, quoted(w), `warm-up concurrent ${i}`, 950 + i)), bodyOf(w));
      }
    }

    for (let round = 0; round < rounds; round++) {
      // Rotate the order each round: every server takes every place in turn.
      const order = servers.map((_, i) => servers[(i + round) % servers.length]!);
      for (const w of group) {
        for (let answer = 0; answer < singleAnswers; answer++) {
          const singleTexts: Partial<Record<ServerName, string[]>> = {};
          const tag = answer === 0 ? `request ${round + 1}` : `request ${round + 1}, answer ${answer + 1}`;
          const messages = prompt(w, quoted(w), tag, 100 * round + (answer === 0 ? 1 : 50 + answer));
          for (const t of order.map((_, i) => order[(i + answer) % order.length]!)) {
            await settle();
            const r = await single(t, messages, bodyOf(w));
            results[w][t.name]!.single.push(r.rate);
            results[w][t.name]!.answers.push(r.answer);
            singleTexts[t.name] = [r.answer.text];
          }
          check(w, `round ${round + 1}, one stream${answer === 0 ? "" : `, answer ${answer + 1}`}`, singleTexts);
        }
        const concurrentTexts: Partial<Record<ServerName, string[]>> = {};
        const many = Array.from({ length: sequences }, (_, i) => prompt(w, quoted(w), `request ${round + 1}.${i + 1}`, 100 * round + 10 + i));
        for (const t of order) {
          await settle();
          const r = await concurrent(t, many, bodyOf(w));
          results[w][t.name]!.concurrent.push(r.rate);
          results[w][t.name]!.concurrentAnswered.push(r.answered);
          results[w][t.name]!.answers.push(...r.answers);
          concurrentTexts[t.name] = r.answers.map((a) => a.text);
        }
        check(w, `round ${round + 1}, ${sequences} streams`, concurrentTexts);
      }
      loads.push(load());
      log(`threads ${threads}, ${group.join(" + ")}: round ${round + 1}/${rounds} done (load ${load()})`);
    }
    for (const t of servers) if (t.name.startsWith("svc")) speculation[t.name]!.after = await speculationOf(t);
    return { threads, results, speculation, echoText: echoText || null, loads };
  } finally {
    for (const t of servers) await t.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Report

function report(groups: GroupResult[]): string {
  const lines: string[] = [];
  const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");
  const threadCounts = [...new Set(groups.map((g) => g.threads))];
  // The draft workload's llama-server drafts with the draft model (-md), whatever --peer-spec says.
  const peerName = workloads.every((w) => w === "draft") ? "llama-server (-md DRAFT --spec-type draft-simple)" : workloads.includes("draft") ? `llama-server (${peerSpec.join(" ")}; the draft workload's: -md DRAFT --spec-type draft-simple)` : `llama-server (${peerSpec.join(" ")})`;
  for (const threads of threadCounts) {
    const mine = groups.filter((g) => g.threads === threads);
    const series = (w: Workload, s: ServerName) => mine.find((g) => g.results[w])?.results[w]?.[s];
    const ratio = (w: Workload, k: Measure, a: ServerName, b: ServerName) => {
      const x = median(series(w, a)?.[k] ?? []);
      const y = median(series(w, b)?.[k] ?? []);
      return Number.isFinite(x) && Number.isFinite(y) ? `**${fmt(x / y, 2)}** (${fmt(x)} vs ${fmt(y)})` : "n/a";
    };
    const cols: Array<[string, ServerName, ServerName]> = [["svc on ÷ off", "svc on", "svc off"]];
    if (!values["no-peer"]) cols.push([`svc on ÷ ${peerName}`, "svc on", "llama"]);
    if (values["peer-off"]) cols.push(["llama-server spec ÷ no spec", "llama", "llama off"]);
    lines.push(`threads ${threads}: tokens/s, medians of ${rounds} rounds (1 stream: ${rounds * singleAnswers} answers)`, "");
    lines.push(`| Workload | Measure | ${cols.map((c) => c[0]).join(" | ")} |`, `|---|---|${cols.map(() => "---").join("|")}|`);
    for (const w of workloads) {
      lines.push(`| ${WORKLOADS[w]} | 1 stream | ${cols.map(([, a, b]) => ratio(w, "single", a, b)).join(" | ")} |`);
      lines.push(`| ${WORKLOADS[w]} | ${sequences} streams, aggregate | ${cols.map(([, a, b]) => ratio(w, "concurrent", a, b)).join(" | ")} |`);
      lines.push(`| ${WORKLOADS[w]} | ${sequences} streams, all answered (from sending) | ${cols.map(([, a, b]) => ratio(w, "concurrentAnswered", a, b)).join(" | ")} |`);
    }
    lines.push("");
    // Per round, to see the spread (the machine's load moves every figure).
    for (const w of workloads) {
      const perRound = (k: Measure, a: ServerName, b: ServerName) =>
        (series(w, a)?.[k] ?? []).map((x, i) => fmt(x / (series(w, b)?.[k][i] ?? Number.NaN), 2)).join(" ");
      lines.push(`${WORKLOADS[w]}, per round: ${cols.map(([label, a, b]) => `${label}: 1 stream (each answer) ${perRound("single", a, b)}, ${sequences} streams ${perRound("concurrent", a, b)}, all answered ${perRound("concurrentAnswered", a, b)}`).join("; ")}`);
    }
    // Acceptance, as each server reports it.
    for (const w of workloads) {
      const parts: string[] = [];
      for (const name of ["svc on", "svc off"] as const) {
        const answers = series(w, name)?.answers ?? [];
        const withDetails = answers.filter((a) => a.accepted !== undefined || a.rejected !== undefined);
        if (withDetails.length === 0) {
          if (name === "svc on") parts.push("svc on: no accepted/rejected_prediction_tokens in usage");
          continue;
        }
        const acc = sum(withDetails.map((a) => a.accepted ?? 0));
        const rej = sum(withDetails.map((a) => a.rejected ?? 0));
        if (acc + rej === 0) parts.push(`${name}: nothing drafted (usage)`);
        else parts.push(`${name}: accepted_prediction_tokens ${fmt(acc / withDetails.length)} and rejected ${fmt(rej / withDetails.length)} per answer (${fmt((100 * acc) / (acc + rej), 0)}% of drafted accepted)`);
      }
      for (const name of ["llama", "llama off"] as const) {
        const answers = series(w, name)?.answers;
        if (!answers) continue;
        const drafted = answers.filter((a) => a.draftN !== undefined);
        if (drafted.length === 0) {
          parts.push(`${name === "llama" ? "llama-server" : "llama-server without speculation"}: no drafts in its timings`);
          continue;
        }
        const n = sum(drafted.map((a) => a.draftN!));
        const acc = sum(drafted.map((a) => a.draftAccepted!));
        parts.push(`${name === "llama" ? "llama-server" : "llama-server (no spec)"}: drafted ${fmt(n / answers.length)} and accepted ${fmt(acc / answers.length)} tokens per answer (${fmt((100 * acc) / n, 0)}%; ${drafted.length} of ${answers.length} answers drafted)`);
      }
      lines.push(`${WORKLOADS[w]}: ${parts.join("; ")}`);
    }
    for (const g of mine) {
      const parts = (["svc on", "svc off"] as const).map((name) => {
        const s = g.speculation[name];
        if (!s?.after) return `${name}: /health has no speculation`;
        // The counters are the server's since it started: the difference is the warm-up's and the rounds'.
        const delta = (k: string) => (typeof s.after![k] === "number" ? (s.after![k] as number) - (typeof s.before?.[k] === "number" ? (s.before[k] as number) : 0) : Number.NaN);
        const run = Number.isFinite(delta("drafted_tokens")) ? ` (this run: ${delta("drafted_tokens")} drafted, ${delta("accepted_tokens")} accepted)` : "";
        return `${name}: /health speculation ${JSON.stringify(s.after)}${run}`;
      });
      lines.push(`${Object.keys(g.results).map((w) => WORKLOADS[w as Workload]).join(" + ")}: ${parts.join("; ")}; load average per round ${g.loads.join(", ")}`);
    }
    lines.push("");
  }
  lines.push("Ratios: higher is better. Issue 44's goals: svc on ÷ off ≥ 1.8 on echo, ≥ 0.97 with nothing to repeat; svc on ÷ llama-server ≥ 1.0.");
  lines.push(mismatches.length === 0 ? `Lossless: all ${comparedAnswers} answers of svc with speculation on equal its answers with it off${workloads.some((w) => w === "echo" || w === "norepeat") ? "; every echo-model answer is the chain it was built to write" : ""}.` : mismatches.join("\n"));
  return lines.join("\n");
}

const binary = values["no-peer"] ? "" : (values["llama-server"] ?? ensureLlamaServer(log));
if (!["f32", "q8_0", "q4_k_m"].includes(values.weights!)) throw new Error(`--weights takes f32, q8_0 or q4_k_m, not ${values.weights}`);
const echoModel =
  values.weights === "q8_0"
    ? ensureEchoModel(join(ROOT, ".cache", "spec", "echo-q8_0.gguf"), { ...ECHO_MODEL, weights: "q8_0" })
    : values.weights === "q4_k_m"
      ? ensureQuantized(ensureEchoModel(join(ROOT, ".cache", "spec", "echo.gguf")), join(ROOT, ".cache", "spec", "echo-Q4_K_M.gguf"), "Q4_K_M", log)
      : ensureEchoModel(join(ROOT, ".cache", "spec", "echo.gguf"));
const peerModel = workloads.includes("peer") ? ensurePeerModel(join(PEER_CACHE, "model.gguf")) : "";
const draftPair = workloads.includes("draft")
  ? {
      target: ensurePeerModel(join(ROOT, ".cache", "spec", "draft-target.gguf"), { ...PEER_MODEL, activeLayers: 2, outputScale: 40 }),
      draft: ensurePeerModel(join(ROOT, ".cache", "spec", "draft.gguf"), { ...PEER_MODEL, nLayers: 2, outputScale: 40 }),
    }
  : null;
const svcDefault = chooseThreads({ cores: availableParallelism(), modelBytes: statSync(echoModel).size, poolThreads: 1, offload: gpu === "cpu" ? "none" : "full" });
const threadCounts = [...new Set((values.threads ?? String(svcDefault)).split(",").map((s) => Number(s.trim())))];
const cpu = cpus()[0]?.model ?? "unknown CPU";
log(`${availableParallelism()} cores (${cpu})${onGpu}; threads ${threadCounts.join(", ")}; ${rounds} rounds; ${tokens}-token answers; ${sequences} sequences of ${contextSize}; ${values["no-peer"] ? "no llama-server" : `llama-server ${binary} ${[...peerSpec, ...peerArgs].join(" ")}`}`);

const groups: GroupResult[] = [];
// Each workload on servers of its own: a server's sequences then hold that workload's prompts from round to
// round, as an agent's would, and no workload's four streams start with prompts another evicted (llama-server
// would restore them from its prompt cache in RAM, svc reads them again: a difference of prompt caching, not of
// speculation; it staggered svc's four first tokens by 400 ms each).
const echoWorkloads = workloads.filter((w) => w === "echo" || w === "tool" || w === "edit" || w === "norepeat");
for (const threads of threadCounts) {
  for (const w of echoWorkloads) groups.push(await measureGroup(binary, echoModel, [w], threads));
  if (workloads.includes("peer")) groups.push(await measureGroup(binary, peerModel, ["peer"], threads));
  if (draftPair) groups.push(await measureGroup(binary, draftPair.target, ["draft"], threads, draftPair.draft));
}
agent.destroy();
const text = report(groups);
console.log(`\n${availableParallelism()} cores (${cpu})${onGpu}; ${rounds} rounds; ${tokens}-token greedy answers; ${sequences} sequences of ${contextSize} tokens; default threads ${svcDefault}; svc on = SVC_SPECULATION unset (its default; with the draft workload, SVC_DRAFT_MODEL set), off = SVC_SPECULATION=off\n`);
console.log(text);
if (mismatches.length > 0) process.exitCode = 1;
if (values.json) writeFileSync(values.json, JSON.stringify({ cores: availableParallelism(), cpu, gpu, rounds, tokens, sequences, contextSize, peerSpec, peerArgs, mismatches, groups }, null, 2));
