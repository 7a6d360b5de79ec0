// The slot loop's paths that need `svc engine build`'s binaries against node-llama-cpp's own evaluate, with
// the build the server would load, in a process of its own; prints what it found as JSON: solo runs
// (resources/engine-native/solo-loop.cpp) and a step's samplings in its decode's job (step-sampling.cpp).
// Run by test/engine-build/engine-build.test.ts: node --import tsx test/support/solo-steps.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LlamaLogLevel, type LlamaContextSequence, type SequenceEvaluateOptions, type Token } from "node-llama-cpp";
import { ensurePeerModel } from "../../bench/peer-model.js";
import { ECHO_MODEL, echoAnswer, ensureEchoModel } from "../../bench/spec-model.js";
import { writeTinyModel } from "../../resources/test-model/cli.js";
import type { DraftRounds } from "../../server/engine/context-binding.js";
import { DraftModel } from "../../server/engine/draft-model.js";
import { loadEngineBuild } from "../../server/engine/engine-build.js";
import { AHEAD_WAIT_MS, SlotLoop, tokenPathsFromEnvironment } from "../../server/engine/slot-loop.js";
import { keepAllGuesses } from "./step-costs.js";
import { spyOnBinding } from "./binding-spy.js";
import { take } from "./take-tokens.js";

const dir = mkdtempSync(join(tmpdir(), "svc-solo-"));
const llama = await loadEngineBuild({ logLevel: LlamaLogLevel.error });
if (!llama) {
  console.log(JSON.stringify({ build: "prebuilt" }));
  process.exit(0);
}
const modelPath = ensurePeerModel(join(dir, "random.gguf"), { nEmbd: 64, nLayers: 1, nHead: 2, nFf: 64, contextLength: 4096, seed: 20 });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({ contextSize: 1024, sequences: 3, threads: 1 });
const prompt = (text: string) => model.tokenize(`<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`, true);
const state = (s: LlamaContextSequence) => JSON.stringify({ next: s.nextTokenIndex, tokens: s.contextTokens });
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Disposed sequences come back to the context asynchronously (node-llama-cpp reclaims them under its lock). */
async function sequencesFree(n: number): Promise<void> {
  while (context.sequencesLeft < n) await new Promise((resolve) => setTimeout(resolve, 5));
}

let calls: Record<string, number> = {};
/** Tokens sampled in decode jobs (decodeBatchAndSample: one per sampler given). */
let stepSampled = 0;
/** Each single-token step's sequence and position, as added to a batch. */
let stepPositions: Array<{ sequence: number; position: number }> = [];
/** Tokens each solo run sampled (what its callback was given before the run's end), and the callback's calls with tokens. */
let samplesPerRun: number[] = [];
let deliveries = 0;
/** What a block watches besides the counts, for the calls it makes. */
let watch: ((method: string, args: unknown[]) => void) | null = null;
spyOnBinding(context, (method, args) => {
  watch?.(method, args);
  calls[method] = (calls[method] ?? 0) + 1;
  if (method === "decodeBatchAndSample") stepSampled += (args[1] as unknown[]).length;
  if (method === "addToBatch" && (args[2] as Uint32Array).length === 1) stepPositions.push({ sequence: args[0] as number, position: args[1] as number });
  if (method !== "runSolo") return;
  const run = samplesPerRun.push(0) - 1;
  const callback = args[8] as (tokens: number[] | -1, ...rest: unknown[]) => void;
  args[8] = (tokens: number[] | -1, ...rest: unknown[]) => {
    if (tokens !== -1) {
      samplesPerRun[run]! += tokens.length;
      deliveries++;
    }
    callback(tokens, ...rest);
  };
});
/**
 * Runs and the calls it made at the binding. How many solo runs a generation takes depends on timing as
 * well as on SOLO_MAX_SAMPLES (a run also ends when the generation has not asked for 4 ms, as on a loaded
 * machine), so what is reported is what holds either way: the runs, the most tokens one run sampled, and
 * the tokens all runs sampled together.
 */
const counted = async <T>(run: () => Promise<T>): Promise<{ value: T; calls: Record<string, number>; runs: { runs: number; longest: number; sampled: number; deliveries: number } }> => {
  calls = {};
  samplesPerRun = [];
  deliveries = 0;
  stepSampled = 0;
  stepPositions = [];
  const value = await run();
  const runs = { runs: samplesPerRun.length, longest: Math.max(0, ...samplesPerRun), sampled: samplesPerRun.reduce((a, b) => a + b, 0), deliveries };
  return { value, calls: { ...calls }, runs };
};
// The counts below describe one token a step: speculation (several a step) is off there, and on in its own
// block at the end.
const withoutGuesses = { ...tokenPathsFromEnvironment(), speculation: false };
const loop = new SlotLoop(context, model, withoutGuesses);
const greedy: SequenceEvaluateOptions = { temperature: 0, yieldEogToken: true };
const results: Record<string, unknown> = { build: "local" };

{
  // 150 greedy tokens: the first sampled in the job that reads the prompt, the others in runs of at most 32; the same tokens and the same sequence state as evaluate.
  const ours = context.getSequence();
  const theirs = context.getSequence();
  const p = prompt("tell me about herons");
  const a = await counted(() => take(loop.evaluate(ours, p, {}, greedy), 150));
  const b = await take(theirs.evaluateWithMetadata(p, {}, greedy), 150);
  // The prompt is one decode job, which samples the first token; every token after it comes from solo runs.
  const decodes = (a.calls.decodeBatch ?? 0) + (a.calls.decodeBatchAndSample ?? 0);
  results.greedy = { sameTokens: same(a.value, b), sameState: state(ours) === state(theirs), ...a.runs, promptSampled: stepSampled, stepDecodes: decodes - 1, samplings: a.calls.sampleToken ?? 0 };
  ours.dispose();
  theirs.dispose();
}
{
  // Sampling with a seed draws the same tokens.
  const p = prompt("a seeded answer");
  const options: SequenceEvaluateOptions = { temperature: 1.2, seed: 5, yieldEogToken: true };
  const ours = context.getSequence();
  const a = await counted(() => take(loop.evaluate(ours, p, {}, options), 80));
  ours.dispose();
  const theirs = context.getSequence();
  const b = await take(theirs.evaluateWithMetadata(p, {}, options), 80);
  theirs.dispose();
  results.seeded = { sameTokens: same(a.value, b), distinct: new Set(a.value).size, ...a.runs };
}
{
  // A budget of ten: tokens 1 to 9 are decoded ahead, the 10th is not, and nothing is sampled past it (the
  // first is sampled in the job that reads the prompt, the others in solo runs).
  const s = context.getSequence();
  const p = prompt("a budget of ten");
  let taken = 0;
  const a = await counted(async () => {
    for await (const _ of loop.evaluate(s, p, {}, greedy, () => 10 - (taken + 1))) if (++taken === 10) break;
  });
  results.budget = { next: s.nextTokenIndex - p.length, ...a.runs };
  s.dispose();
}
{
  // A second evaluation starting mid-run ends the run; both get the answers they get alone.
  const alone: Token[][] = [];
  for (const text of ["first of two", "second of two"]) {
    const s = context.getSequence();
    alone.push(await take(s.evaluateWithMetadata(prompt(text), {}, greedy), 60));
    s.dispose();
  }
  const [s1, s2] = [context.getSequence(), context.getSequence()];
  let second: Promise<Token[]> | null = null;
  const a = await counted(async () => {
    const first = await take(loop.evaluate(s1, prompt("first of two"), {}, greedy), 60, (n) => {
      if (n === 20) second = take(loop.evaluate(s2, prompt("second of two"), {}, greedy), 60);
    });
    return [first, await second!];
  });
  results.interrupted = { sameTokens: same(a.value, alone), stops: a.calls.soloStop ?? 0, ...a.runs, stepSamplings: (a.calls.sampleToken ?? 0) + stepSampled };
  s1.dispose();
  s2.dispose();
}
{
  // A prompt that comes while a lone prompt is read does not hold back the lone one's first token: that token
  // is sampled in the job that reads the lone prompt's last chunk, not in a later batch with the newcomer's
  // prompt (bench:spec's four answers with nothing to repeat, speculation off: docs/performance.md section 49).
  const texts = ["a lone prompt read first", "a second prompt, sent while the first is read"];
  const alone: Token[][] = [];
  for (const text of texts) {
    const s = context.getSequence();
    alone.push(await take(s.evaluateWithMetadata(prompt(text), {}, greedy), 12));
    s.dispose();
  }
  await sequencesFree(2);
  const [s1, s2] = [context.getSequence(), context.getSequence()];
  const [id1, id2] = [s1, s2].map((s) => (s as unknown as { _sequenceId: number })._sequenceId);
  /** Each batch's sequences: how many tokens each added, and whether it asked for logits. */
  const batches: Array<Array<{ id: number; tokens: number; logits: boolean }>> = [];
  let reading!: () => void;
  const firstDecode = new Promise<void>((resolve) => (reading = resolve));
  watch = (method, args) => {
    if (method === "initBatch") batches.push([]);
    if (method === "addToBatch") batches.at(-1)!.push({ id: args[0] as number, tokens: (args[2] as Uint32Array).length, logits: (args[3] as Uint32Array).length > 0 });
    if (method === "decodeBatch" || method === "decodeBatchAndSample") reading();
  };
  const first = take(loop.evaluate(s1, prompt(texts[0]!), {}, greedy), 12);
  // The second prompt is queued while the first one's decode job runs.
  await firstDecode;
  const second = take(loop.evaluate(s2, prompt(texts[1]!), {}, greedy), 12);
  const answers = await Promise.all([first, second]);
  watch = null;
  // The batch where the first answer's first token was sampled: its first with logits for that sequence.
  const sampledIn = batches.find((b) => b.some((item) => item.id === id1 && item.logits))!;
  results.newcomer = { sameTokens: same(answers, alone), firstPromptTokens: prompt(texts[0]!).length, sampledWith: sampledIn.map(({ id, tokens }) => ({ sequence: id === id1 ? "first" : id === id2 ? "second" : id, tokens })) };
  s1.dispose();
  s2.dispose();
}
{
  // A reader that stalls holds no one up: the run samples SOLO_AHEAD tokens past its last ask, ends 4 ms
  // later and lets the context go, so node-llama-cpp's own work on another sequence (a prompt read) goes
  // ahead meanwhile; the tokens decoded past what the reader took are taken out again.
  const [s1, s2] = [context.getSequence(), context.getSequence()];
  const tokens = loop.evaluate(s1, prompt("a stalled reader"), {}, greedy)[Symbol.asyncIterator]();
  for (let i = 0; i < 5; i++) await tokens.next();
  const read = s2.evaluateWithoutGeneratingNewTokens(prompt("read while the other stalls")).then(() => "read");
  const outcome = await Promise.race([read, new Promise((resolve) => setTimeout(() => resolve("still waiting after 5 s"), 5000))]);
  await tokens.return(undefined);
  await read;
  results.stalled = { outcome, next: s1.nextTokenIndex - prompt("a stalled reader").length };
  s1.dispose();
  s2.dispose();
}
{
  // Three sequences stepping together (no solo runs): every step's tokens sampled in its decode's job, none
  // in a job of its own, with the tokens and sequence state each gets alone from evaluate (each stops after
  // its 40th token, decoded ahead and taken out again). Then one reader is slow every third token (longer
  // than a batch waits for an ask): its token, sampled before it asked, is kept for the ask rather than
  // decoded and sampled again.
  const texts = ["first of three", "second of three", "third of three"];
  /** A sequence's state past its prompt. */
  const after = (s: LlamaContextSequence, text: string) => JSON.stringify({ next: s.nextTokenIndex - prompt(text).length, tokens: s.contextTokens.slice(prompt(text).length) });
  const alone: Token[][] = [];
  const aloneState: string[] = [];
  for (const text of texts) {
    const s = context.getSequence();
    alone.push(await take(s.evaluateWithMetadata(prompt(text), {}, greedy), 40));
    aloneState.push(after(s, text));
    s.dispose();
  }
  const batched = new SlotLoop(context, model, withoutGuesses);
  await sequencesFree(3);
  const seqs = texts.map(() => context.getSequence());
  const a = await counted(() => Promise.all(texts.map((text, i) => take(batched.evaluate(seqs[i]!, prompt(text), {}, greedy), 40))));
  results.together = {
    sameTokens: same(a.value, alone),
    sameState: seqs.every((s, i) => after(s, texts[i]!) === aloneState[i]),
    stepSampled,
    samplings: a.calls.sampleToken ?? 0,
    runs: a.runs.runs,
  };
  for (const s of seqs) s.dispose();

  // The slow reader takes 12 tokens, waiting after every third; the other two take theirs about every 2 ms
  // (well within the wait for asks) for 40, so the slow one never generates alone.
  await sequencesFree(1);
  const slowAlone = context.getSequence();
  const slowTokens = await take(slowAlone.evaluateWithMetadata(prompt(texts[2]!), {}, greedy), 12);
  const slowAloneState = after(slowAlone, texts[2]!);
  slowAlone.dispose();
  await sequencesFree(3);
  const slowSeqs = texts.map(() => context.getSequence());
  const slow = await counted(() =>
    Promise.all(
      texts.map(async (text, i) => {
        const out: Token[] = [];
        for await (const { token } of batched.evaluate(slowSeqs[i]!, prompt(text), {}, greedy)) {
          out.push(token);
          if (i < 2) await new Promise((r) => setTimeout(r, 2));
          else if (out.length % 3 === 0) await new Promise((r) => setTimeout(r, AHEAD_WAIT_MS * 4));
          if (out.length === (i < 2 ? 40 : 12)) break;
        }
        return out;
      }),
    ),
  );
  const slowId = (slowSeqs[2] as unknown as { _sequenceId: number })._sequenceId;
  const slowPositions = stepPositions.filter((p) => p.sequence === slowId).map((p) => p.position);
  results.slowTogether = {
    sameTokens: same(slow.value, [alone[0], alone[1], slowTokens]),
    sameState: slowSeqs.every((s, i) => after(s, texts[i]!) === [aloneState[0], aloneState[1], slowAloneState][i]),
    slowSteps: slowPositions.length,
    slowDecodedTwice: slowPositions.length - new Set(slowPositions).size,
    samplings: slow.calls.sampleToken ?? 0,
    runs: slow.runs.runs,
  };
  for (const s of slowSeqs) s.dispose();
}
{
  // Repeat penalties read the tokens taken in: they stay on the token-by-token path.
  await sequencesFree(1);
  const s = context.getSequence();
  const punish: Token[] = [];
  const options: SequenceEvaluateOptions = { temperature: 0, yieldEogToken: true, repeatPenalty: { punishTokens: () => punish, penalty: 1.3 } };
  const a = await counted(() => take(loop.evaluate(s, prompt("penalties"), {}, options), 20, () => undefined));
  results.penalties = { runs: a.runs.runs, samplings: a.calls.sampleToken ?? 0 };
  s.dispose();
}

{
  // Speculation beside the build's paths: an answer that repeats the conversation (the model's own greedy
  // answer, twice, then the question again) gives evaluate's tokens and state, greedy and seeded.
  await sequencesFree(2);
  const guessing = new SlotLoop(context, model, { solo: true, stepSampling: true, speculation: true, queuedSamplings: true }, null, keepAllGuesses());
  const head = prompt("say it again");
  const first = context.getSequence();
  const answer = await take(first.evaluateWithMetadata(head, {}, greedy), 60);
  first.dispose();
  const echo = [...head, ...answer, ...answer, ...head];
  const facts: Record<string, unknown> = { paths: guessing.paths };
  for (const [name, options] of [["greedy", greedy], ["seeded", { temperature: 0.9, seed: 11, yieldEogToken: true }]] as const) {
    await sequencesFree(2);
    const ours = context.getSequence();
    const theirs = context.getSequence();
    let drafted = 0;
    let accepted = 0;
    const a: Token[] = [];
    for await (const t of guessing.evaluate(ours, echo, {}, options)) {
      a.push(t.token);
      drafted += t.speculation?.drafted ?? 0;
      if (t.speculation?.accepted) accepted++;
      if (a.length === 100) break;
    }
    const b = await take(theirs.evaluateWithMetadata(echo, {}, options), 100);
    facts[name] = { sameTokens: same(a, b), sameState: state(ours) === state(theirs), drafted, accepted };
    ours.dispose();
    theirs.dispose();
  }
  results.speculation = facts;
}

{
  // An answer that repeats its prompt from its first token (bench:spec's echo model, small): it takes steps
  // with guesses as soon as prompt lookup has one, and no solo run starts between them (SPECULATION_SOLO_AFTER).
  const echoPath = ensureEchoModel(join(dir, "echo.gguf"), { nEmbd: 512, nLayers: 2, nHead: 4, nFf: 512, contextLength: 4096, seed: ECHO_MODEL.seed });
  const echoModel = await llama.loadModel({ modelPath: echoPath, gpuLayers: 0 });
  const echoContext = await echoModel.createContext({ contextSize: 1024, sequences: 1, threads: 1 });
  const loop = new SlotLoop(echoContext, echoModel, { solo: true, stepSampling: true, speculation: true, queuedSamplings: true }, null, keepAllGuesses());
  const feed = echoModel.tokenize(`<|im_start|>user\nRewrite this file.\n${echoAnswer(120)}\n<|im_end|>\n<|im_start|>assistant\n`, true);
  const sequence = echoContext.getSequence();
  let accepted = 0;
  let tokens = 0;
  const { runs } = await counted(async () => {
    for await (const t of loop.evaluate(sequence, feed, {}, greedy)) {
      if (t.speculation?.accepted) accepted++;
      if (++tokens === 100) break;
    }
  });
  results.echoSolo = { tokens, accepted, runs: runs.runs };
  sequence.dispose();
  await echoContext.dispose();
  await echoModel.dispose();
}

{
  // draft-rounds.cpp: a draft model's rounds in one job (draft-model.ts nativeRounds). The tiny model drafting
  // for itself, whose greedy tokens come with these probabilities whatever the prompt: 0.94 0.58 0.47 0.47
  // 0.47 0.47 0.77 0.51 0.51; the job's guesses are its greedy answer's, cut by the JavaScript rounds' rules.
  const tinyPath = writeTinyModel();
  const tiny = await llama.loadModel({ modelPath: tinyPath, gpuLayers: 0 });
  const target = { model: tiny, context: await tiny.createContext({ contextSize: 2048, sequences: 2, threads: 1 }) };
  const ask = tiny.tokenize("<|im_start|>user\nwrite a long story<|im_end|>\n<|im_start|>assistant\n", true);
  const reference = target.context.getSequence();
  const greedy: Token[] = [];
  for await (const t of reference.evaluate(ask, { temperature: 0 })) if (greedy.push(t) >= 10) break;
  reference.dispose();
  const drafts: DraftModel[] = [];
  const draftCalls: Record<string, number> = {};
  // Each job's rounds after its first, as it counted and timed them (the thread policy's lone-decode measure).
  const jobs: DraftRounds[] = [];
  const load = async (minConfidence: number) => {
    const draft = await DraftModel.load({ llama, modelPath: tinyPath, target, threads: 1, minConfidence });
    drafts.push(draft);
    spyOnBinding((draft as unknown as { context: object }).context, (method) => {
      draftCalls[method] = (draftCalls[method] ?? 0) + 1;
      return method === "draftRounds" ? (result: unknown) => jobs.push(result as DraftRounds) : undefined;
    });
    return draft;
  };
  const sure = await load(0.3);
  const long = await sure.draft(0, ask, 8);
  // After the served model kept four of them: the next draft reads the two tokens new to it.
  const next = await sure.draft(0, [...ask, ...greedy.slice(0, 4)], 4);
  // Sure from 0.55: alone, one ends at its third token (0.47), one started later at its second (0.51);
  // together, the later one's unsure token is written beside the other's sure one, and both end after.
  const later = [...ask, ...greedy.slice(0, 6)];
  const unsure = await load(0.55);
  const alone = [await unsure.draft(0, ask, 8), await unsure.draft(1, later, 8)];
  const together = await Promise.all([(await load(0.55)).draft(0, ask, 8), drafts.at(-1)!.draft(1, later, 8)]);
  results.draft = {
    draftRounds: (draftCalls.draftRounds ?? 0) > 0,
    decodes: draftCalls.decodeBatch ?? 0,
    sure: same(long, greedy.slice(0, 8)),
    next: same(next, greedy.slice(4, 8)),
    alone: same(alone, [greedy.slice(0, 2), greedy.slice(6, 7)]),
    together: same(together, [greedy.slice(0, 2), greedy.slice(6, 8)]),
    // 8 guesses to the most asked: 7 rounds after the one that read the prompt; 4 to the most: 3; cut by
    // confidence after 2 guesses: 2 (the second decoded, then refused), after 1: 1; the two together: 2.
    laterRounds: jobs.map((job) => job.laterRounds),
    timed: jobs.every((job) => job.laterMs > 0 && Number.isFinite(job.laterMs)),
  };
  for (const d of drafts) await d.close();
  await target.context.dispose();
  await tiny.dispose();
}

console.log(JSON.stringify(results));
await context.dispose();
await model.dispose();
await llama.dispose();
rmSync(dir, { recursive: true, force: true });
