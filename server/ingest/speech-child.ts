// The speech engine's process (started by speech.ts): reads 16-bit 16 kHz mono samples from stdin, transcribes
// them with whisper.cpp and writes one JSON line (SpeechChildReply) to stdout.
// argv: model path, sample count, threads, language ("auto" or a language code).
import { createRequire } from "node:module";
import type { SpeechChildReply } from "./speech.js";

interface WhisperContext {
  transcribeData(audio: ArrayBuffer, options: Record<string, unknown>): { promise: Promise<{ language?: string; segments: { t0: number; t1: number; text: string }[] }> };
  release(): Promise<void>;
}
interface WhisperModule {
  initWhisper(options: { filePath: string; useGpu?: boolean }, variant?: "default"): Promise<WhisperContext>;
}

const require = createRequire(import.meta.url);
const [modelPath, countText, threadsText, language] = process.argv.slice(2);
const expectedBytes = Number(countText) * 2;

/** Leaves at once: process.exit would wait for a transcription in progress, which cannot be stopped. */
function stopNow(): never {
  process.kill(process.pid, "SIGKILL");
  throw new Error("unreachable");
}

function reply(message: SpeechChildReply): void {
  process.stdout.write(`${JSON.stringify(message)}\n`, () => process.exit(0));
}

async function transcribe(pcm: Buffer): Promise<void> {
  // The CPU build: transcripts run beside the language model, which owns the GPU.
  const whisper = require("@fugood/whisper.node") as WhisperModule;
  const context = await whisper.initWhisper({ filePath: modelPath!, useGpu: false }, "default");
  const audio = pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + pcm.byteLength) as ArrayBuffer;
  const result = await context.transcribeData(audio, {
    language,
    maxThreads: Math.max(1, Number(threadsText) || 1),
  }).promise;
  await context.release();
  reply({ ok: true, language: result.language ?? (language === "auto" ? null : language!), segments: result.segments });
}

const chunks: Buffer[] = [];
let received = 0;
let started = false;
process.stdin.on("data", (chunk: Buffer) => {
  if (started) return;
  chunks.push(chunk);
  received += chunk.length;
  if (received < expectedBytes) return;
  started = true;
  // From here stdin is only the lifeline. Unreferenced, it does not keep this process alive: when the binding
  // drops an error (its promise then never settles) the process ends without a reply instead of hanging.
  process.stdin.unref();
  transcribe(Buffer.concat(chunks).subarray(0, expectedBytes)).catch((err: unknown) => reply({ ok: false, error: (err as Error)?.message ?? String(err) }));
});
process.stdin.on("end", stopNow);
process.stdin.on("error", stopNow);
