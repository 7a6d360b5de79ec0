// `svc models ...`: list, pull, use, remove and bench-threads, over the data dir's models folder. Loaded
// lazily by cli.ts, so `svc keys` does not pay for node-llama-cpp.
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { AppError } from "../../core/errors.js";
import { Store } from "../../store/store.js";
import { UPSTREAMS_SETTING } from "../../engine/upstream-settings.js";
import { ModelsService, type ModelEntry, type PullEvent } from "./models-service.js";
import { formatBytes, formatDuration, ProgressRenderer } from "./progress-bar.js";
import { RECOMMENDED_MODEL, RECOMMENDED_SPEECH_MODEL } from "./model-sources.js";


/** Wrong usage: cli.ts prints it with the usage text and exits 2 (it matches on the name). */
export class ModelsUsageError extends Error {
  override name = "UsageError";
}

type Values = Record<string, string | boolean | undefined>;

function withService<T>(dataDir: string, action: (models: ModelsService, store: Store) => Promise<T>): Promise<T> {
  const store = Store.open(dataDir);
  const models = new ModelsService({ store, dataDir });
  return action(models, store).finally(() => store.close());
}

/**
 * Upstreams `svc serve` generates on (SVC_UPSTREAM, or the window's setting), if any: the model there is
 * theirs, so the list says so (a `svc serve --upstream` flag is not visible from here).
 */
function upstreamNote(store: Store): string | null {
  const urls = (process.env.SVC_UPSTREAM ?? "").trim() || store.settings.get(UPSTREAMS_SETTING)?.value;
  if (!urls) return null;
  return (
    "Upstreams are configured: `svc serve` generates on them, and the model they serve is theirs to switch " +
    "(restart them with another model). The file `svc serve` loads here is read only for its tokenizer and chat template, and must be the one they serve."
  );
}

function describeEntry(m: ModelEntry, separator = "  "): string {
  if (m.error) return m.error;
  const kind = [m.architecture, m.sizeLabel, m.quantization].filter(Boolean).join(" ");
  return `${kind}${m.name ? `${separator}"${m.name}"` : ""}${m.projector ? `${separator}sees images` : ""}`;
}

async function list(dataDir: string, values: Values): Promise<number> {
  const { listing, note } = await withService(dataDir, async (models, store) => ({ listing: await models.list(), note: upstreamNote(store) }));
  if (values.json) {
    console.log(JSON.stringify(note ? { ...listing, upstream_note: note } : listing, null, 2));
    return 0;
  }
  printLanguageModels(listing);
  if (note) console.log(note);
  printSpeechModels(listing.speech);
  return 0;
}

function printLanguageModels(listing: Awaited<ReturnType<ModelsService["list"]>>): void {
  if (listing.models.length === 0 && listing.partial.length === 0) {
    console.log(`No models in ${listing.directory} yet.`);
    console.log(
      `\`svc models pull\` downloads the recommended one: ${RECOMMENDED_MODEL.title}, about ${formatBytes(RECOMMENDED_MODEL.approxBytes)} ` +
        `(${RECOMMENDED_MODEL.source}).`,
    );
    return;
  }
  console.log(`Models in ${listing.directory}:`);
  const width = Math.max(...listing.models.map((m) => m.file.length), 4);
  for (const m of listing.models)
    console.log(`${m.active ? "*" : " "} ${m.file.padEnd(width)}  ${formatBytes(m.sizeBytes).padStart(8)}  ${describeEntry(m)}`);
  if (listing.partial.length > 0) {
    console.log("Downloads not finished:");
    for (const p of listing.partial) {
      const kept = `${formatBytes(p.keptBytes)}${p.totalBytes ? ` of ${formatBytes(p.totalBytes)}` : ""}`;
      const speech = /\.bin$/i.test(p.file);
      const how = p.downloadingNow ? "downloading now" : p.source ? `resume: svc models pull ${speech ? "--speech " : ""}${p.source}` : "";
      console.log(`  ${p.file}  ${kept} kept so far${how ? `  (${how})` : ""}`);
    }
  }
  if (listing.active) console.log(`* active: \`svc serve\` loads ${listing.active}`);
  else console.log("No active model: choose one with `svc models use FILE`.");
}

/** The speech models section of `svc models list` (printed first: the language models end the listing). */
function printSpeechModels(speech: Awaited<ReturnType<ModelsService["list"]>>["speech"]): void {
  if (speech.models.length === 0) {
    console.log(
      `No speech model: audio and video uploads get no transcript. \`svc models pull --speech\` downloads ${RECOMMENDED_SPEECH_MODEL.title}, ` +
        `about ${formatBytes(RECOMMENDED_SPEECH_MODEL.approxBytes)}.`,
    );
    return;
  }
  console.log(`Speech models (transcripts of audio and video) in ${speech.directory}:`);
  const width = Math.max(...speech.models.map((m) => m.file.length), 4);
  for (const m of speech.models)
    console.log(`${m.active ? "*" : " "} ${m.file.padEnd(width)}  ${formatBytes(m.sizeBytes).padStart(8)}  ${describeEntry(m)}`);
  if (speech.active) console.log(`* in use: uploads are transcribed with ${speech.active}`);
  else console.log("None in use: choose one with `svc models use --speech FILE`.");
}

async function pull(dataDir: string, source: string | undefined, values: Values): Promise<number> {
  const speech = values.speech === true;
  const renderer = new ProgressRenderer(process.stderr);
  const controller = new AbortController();
  let interrupted = 0;
  const onSigint = () => {
    // One Ctrl+C can arrive twice (from the terminal and again from npx, which forwards it): only a second
    // press a moment later means "exit now", and that skips keeping the download.
    if (interrupted) {
      if (Date.now() - interrupted < 1500) return;
      process.exit(130);
    }
    interrupted = Date.now();
    renderer.end();
    console.error("Stopping; keeping what is downloaded ...");
    controller.abort(new Error("interrupted"));
  };
  process.on("SIGINT", onSigint);
  const stallSeconds = Number(process.env.SVC_DOWNLOAD_STALL_TIMEOUT ?? "");
  let announced = false;
  const onEvent = (event: PullEvent) => {
    switch (event.phase) {
      case "resolving":
        console.error(`Resolving ${event.source} ...`);
        return;
      case "downloading":
        if (!announced) {
          announced = true;
          const total = event.progress.totalBytes;
          console.error(`Downloading ${event.file}${total > 0 ? ` (${formatBytes(total)})` : ""}`);
          if (event.resumedFromBytes > 0)
            console.error(`Resuming: ${formatBytes(event.resumedFromBytes)}${total > 0 ? ` of ${formatBytes(total)}` : ""} already downloaded.`);
        }
        renderer.update(event.progress);
        return;
      case "verifying":
        renderer.end();
        console.error(`Verifying ${event.file} ...`);
        return;
      case "done":
        return;
    }
  };
  const started = Date.now();
  try {
    const result = await withService(dataDir, (models) =>
      models.pull(source, {
        sha256: typeof values.sha256 === "string" ? values.sha256 : undefined,
        onEvent,
        signal: controller.signal,
        stallTimeoutMs: Number.isFinite(stallSeconds) && stallSeconds > 0 ? stallSeconds * 1000 : undefined,
        kind: speech ? "speech" : "llm",
        mmproj: values["no-mmproj"] === true ? false : typeof values.mmproj === "string" ? values.mmproj : undefined,
      }),
    );
    const kind = [result.summary.architecture, result.summary.sizeLabel, result.summary.quantization].filter(Boolean).join(" ");
    if (result.alreadyPresent) console.log(`${result.file} is already downloaded (${formatBytes(result.sizeBytes)}, ${kind}).`);
    else
      console.log(
        `Downloaded ${result.file} (${formatBytes(result.sizeBytes)}, ${kind}) in ${formatDuration((Date.now() - started) / 1000)}` +
          `${result.resumedFromBytes > 0 ? `, resumed after ${formatBytes(result.resumedFromBytes)}` : ""}.`,
      );
    if (result.projector) console.log(`It sees images: its vision projector is ${basename(result.projector)}.`);
    if (speech && result.madeActive) console.log("It is now the speech model: audio and video uploads get transcripts made with it.");
    else if (speech) console.log(`Use it for transcripts with \`svc models use --speech ${result.file}\`.`);
    else if (result.madeActive) console.log(`It is now the active model: \`svc serve\` loads it.`);
    else console.log(`Use it with \`svc models use ${result.file}\`.`);
    return 0;
  } catch (err) {
    renderer.end();
    if (interrupted && err instanceof AppError) {
      console.error(`svc: ${err.message}`);
      return 130;
    }
    throw err;
  } finally {
    process.off("SIGINT", onSigint);
  }
}

async function use(dataDir: string, file: string | undefined, values: Values): Promise<number> {
  if (!file) throw new ModelsUsageError("svc models use needs a model file (see `svc models list`).");
  const entry = await withService(dataDir, (models) => models.use(file, { kind: values.speech ? "speech" : "llm" }));
  if (values.speech) {
    console.log(`Speech model: ${entry.file} (${formatBytes(entry.sizeBytes)}, ${describeEntry(entry, ", ")}).`);
    console.log("Audio and video uploaded from now on are transcribed with it (a running server included).");
    return 0;
  }
  console.log(`Active model: ${entry.file} (${formatBytes(entry.sizeBytes)}, ${describeEntry(entry, ", ")}).`);
  console.log("`svc serve` loads it at start; a server already running on this data dir (without --model) switches to it within a few seconds.");
  return 0;
}

async function remove(dataDir: string, file: string | undefined, values: Values): Promise<number> {
  if (!file) throw new ModelsUsageError("svc models remove needs a model file (see `svc models list`).");
  const result = await withService(dataDir, (models) => models.remove(file, { kind: values.speech ? "speech" : "llm", force: values.force === true }));
  console.log(`Removed ${result.removed.join(", ")}.`);
  if (values.speech) {
    if (result.wasActive) console.log("It was the speech model in use: uploads get no transcript until another is pulled or chosen.");
    return 0;
  }
  if (result.wasActive) console.log("It was the active model: no model is active now (`svc models use FILE` picks another).");
  return 0;
}

async function benchThreads(dataDir: string, values: Values): Promise<number> {
  const counts = String(values.threads ?? "")
    .split(",")
    .filter((t) => t.trim() !== "")
    .map(Number);
  if (counts.some((n) => !Number.isInteger(n) || n < 1 || n > 256)) throw new ModelsUsageError("--threads takes a list of counts, e.g. 1,2,4.");
  const tokens = values.tokens === undefined ? 128 : Number(values.tokens);
  if (!Number.isInteger(tokens) || tokens < 8 || tokens > 4096) throw new ModelsUsageError("--tokens must be an integer from 8 to 4096.");
  const modelArg = typeof values.model === "string" ? values.model : undefined;
  const modelPath = await withService(dataDir, async (models) => {
    if (modelArg) return (await models.list()).models.find((m) => m.file === modelArg || m.file === `${modelArg}.gguf`)?.path ?? modelArg;
    const active = models.active();
    if (!active) throw new AppError("invalid_request", "No active model to measure: pass --model FILE or run `svc models use` first.");
    return active.path;
  });
  const { benchmarkThreads } = await import("../../engine/thread-bench.js");
  console.error(`Measuring generation speed of ${modelPath} on the CPU (${tokens} tokens per run) ...`);
  const results = await benchmarkThreads({ modelPath, threads: counts.length > 0 ? counts : undefined, tokens });
  const best = results.reduce((a, b) => (b.tokensPerSecond > a.tokensPerSecond ? b : a));
  for (const r of results)
    console.log(
      `${String(r.threads).padStart(3)} thread(s): ${r.tokensPerSecond.toFixed(1).padStart(8)} tokens/s generating, ` +
        `${r.promptTokensPerSecond.toFixed(0).padStart(6)} tokens/s reading the prompt  (${(best.tokensPerSecond / r.tokensPerSecond).toFixed(1)}x slower than the best)`,
    );
  console.log(`Fastest: ${best.threads} thread(s). Start the server with --threads ${best.threads} (or SVC_THREADS=${best.threads}) to use it.`);
  return 0;
}

/** Runs `svc models ...`; returns the exit code. Throws ModelsUsageError for bad usage, AppError for the rest. */
export async function runModelsCommand(argv: string[], defaultDataDir: string): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    options: {
      "data-dir": { type: "string" },
      json: { type: "boolean" },
      sha256: { type: "string" },
      force: { type: "boolean" },
      model: { type: "string" },
      threads: { type: "string" },
      tokens: { type: "string" },
      speech: { type: "boolean" },
      mmproj: { type: "string" },
      "no-mmproj": { type: "boolean" },
    },
    allowPositionals: true,
    strict: true,
  });
  const dataDir = values["data-dir"] ?? process.env.SVC_DATA_DIR ?? defaultDataDir;
  if (positionals.length > 1) throw new ModelsUsageError(`Too many arguments: ${positionals.slice(1).join(" ")}.`);
  switch (command) {
    case "list":
    case "ls":
      return list(dataDir, values);
    case "pull":
      return pull(dataDir, positionals[0], values);
    case "use":
      return use(dataDir, positionals[0], values);
    case "remove":
    case "rm":
      return remove(dataDir, positionals[0], values);
    case "bench-threads":
      return benchThreads(dataDir, values);
    default:
      throw new ModelsUsageError(`Unknown models command '${command ?? ""}'. Use list, pull, use, remove or bench-threads.`);
  }
}
