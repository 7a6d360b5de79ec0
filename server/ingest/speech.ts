// Transcripts with whisper.cpp (through @fugood/whisper.node's prebuilt binaries) and the speech model that
// `svc models pull --speech` keeps. Without a speech model, audio and video get their facts, keyframes and
// an honest note, never a made-up transcript (docs/api.md, "Files").
//
// The engine runs in a child process of its own, not in the ingest worker thread, because of how the binding
// behaves: a transcription cannot be stopped once started (whisper.cpp gets no abort callback), a worker
// thread ended during one never finishes ending, process.exit waits for it, and an error inside whisper_full
// leaves the binding's promise unsettled forever. A child process is killed outright when its parent closes
// its stdin (the ingest worker ended, timed out or the server stopped), and a child that falls silent exits
// without a result, which reads here as a failure instead of a hang.
import { spawn } from "node:child_process";
import { availableParallelism } from "node:os";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { readWhisperModel, type WhisperModelSummary } from "./whisper-model.js";

export interface TranscriptSegment {
  /** Milliseconds from the start of the audio. */
  startMs: number;
  endMs: number;
  text: string;
}

export interface Transcript {
  text: string;
  segments: TranscriptSegment[];
  /** The language the model transcribed (detected by multilingual models). */
  language: string | null;
  model: WhisperModelSummary;
}

export const NO_SPEECH_MODEL =
  "No transcript is available: this server has no speech recognition model, so what is said in it is unknown.";

/** Threads for whisper.cpp: half the cores, at most 4 (the language model needs the rest). */
export function defaultSpeechThreads(cores = availableParallelism()): number {
  return Math.max(1, Math.min(4, Math.floor(cores / 2)));
}

export class TranscriptionError extends Error {
  override name = "TranscriptionError";
}

/** Float samples as the 16-bit PCM the binding takes. */
export function toPcm16(samples: Float32Array): Int16Array {
  const pcm = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767)));
  return pcm;
}

/** The message the child writes on stdout as its last line. */
export type SpeechChildReply =
  | { ok: true; language: string | null; segments: { t0: number; t1: number; text: string }[] }
  | { ok: false; error: string };

function childCommand(): { command: string; args: string[] } {
  const here = import.meta.url;
  const ts = here.endsWith(".ts");
  const entry = fileURLToPath(new URL(ts ? "./speech-child.ts" : "./speech-child.js", here));
  // From TypeScript sources (tests, tsx) the child loads tsx first; in the packaged app process.execPath is
  // Electron, which ELECTRON_RUN_AS_NODE (set below) turns into plain Node.
  const loader = ts ? ["--import", new URL(`file://${createRequire(here).resolve("tsx")}`).href] : [];
  return { command: process.execPath, args: [...loader, entry] };
}

/**
 * Transcribes 16 kHz mono samples with the whisper.cpp model at `modelPath`; null without a model. Throws
 * TranscriptionError when the model cannot be used or the engine fails.
 */
export async function transcribe(
  samples: Float32Array,
  modelPath: string | null | undefined,
  options: { threads?: number } = {},
): Promise<Transcript | null> {
  if (!modelPath) return null;
  let model: WhisperModelSummary;
  try {
    model = await readWhisperModel(modelPath);
  } catch (err) {
    throw new TranscriptionError(`the speech model ${modelPath} cannot be used: ${(err as Error).message}`);
  }
  if (samples.length === 0) return { text: "", segments: [], language: null, model };
  const pcm = toPcm16(samples);
  const language = model.multilingual ? "auto" : "en";
  const threads = options.threads ?? defaultSpeechThreads();
  const { command, args } = childCommand();
  const reply = await new Promise<SpeechChildReply>((resolve, reject) => {
    const child = spawn(command, [...args, modelPath, String(pcm.length), String(threads), language], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ELECTRON_RUN_AS_NODE: "1" },
      windowsHide: true,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      if (stdout.length < 16 * 1024 * 1024) stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-64 * 1024);
    });
    // The samples, then stdin stays open: closing it (or this process ending) tells the child to stop.
    child.stdin.on("error", () => undefined);
    child.stdin.write(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
    child.on("error", (err) => reject(new TranscriptionError(`the speech engine did not start: ${err.message}`)));
    child.on("close", (code, signal) => {
      child.stdin.destroy();
      const last = stdout.trim().split("\n").pop() ?? "";
      try {
        if (last.startsWith("{")) return resolve(JSON.parse(last) as SpeechChildReply);
      } catch {
        // fall through: no readable reply
      }
      const errors = stderr
        .split("\n")
        .filter((line) => /error|failed|abort|terminate/i.test(line))
        .slice(-3)
        .join(" ")
        .trim();
      reject(
        new TranscriptionError(
          `the speech engine stopped without a transcript (${signal ? `signal ${signal}` : `exit code ${code}`})${errors ? `: ${errors}` : ""}`,
        ),
      );
    });
  });
  if (!reply.ok) throw new TranscriptionError(`the speech engine failed: ${reply.error}`);
  const segments = reply.segments
    .map((s) => ({ startMs: Math.max(0, s.t0), endMs: Math.max(s.t0, s.t1), text: s.text.trim() }))
    .filter((s) => s.text !== "");
  return { text: segments.map((s) => s.text).join(" "), segments, language: reply.language, model };
}
