// Transcripts of uploaded audio and video, end to end: `svc models pull --speech` fetches the generated tiny
// whisper.cpp model from a file server on loopback, `svc serve` transcribes a WAV and an MP4 made with the
// bundled ffmpeg through the real engine (whisper.cpp in @fugood/whisper.node), and the content the model
// reads is exactly what whisper.cpp says for that audio (checked against the binding called directly). The
// tiny model hears nothing, so its transcript is nonsense words from its own vocabulary, never the tone.
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { buildTinyWhisperModel, TINY_WHISPER_SYLLABLES } from "../../resources/test-model/tiny-whisper.js";
import { decodeAudio } from "../../server/ingest/media.js";
import { toPcm16 } from "../../server/ingest/speech.js";
import { captionMp4, toneWav } from "../support/file-fixtures.js";
import { startModelServer, type ModelServer } from "../support/model-server.js";
import { createKey, runSvc, runSvcAsync, startSvc, tempDataDir, type SvcServer } from "../support/svc-process.js";

const require = createRequire(import.meta.url);
const speechModel = buildTinyWhisperModel();
let files: ModelServer;
let server: SvcServer;
let dataDir: string;
let client: OpenAI;
let scratch: string;

type FileOut = OpenAI.FileObject & { content_kind: string; mime_type: string; token_estimate: number; status: string };

beforeAll(async () => {
  files = await startModelServer();
  files.files.set("/whisper/ggml-tiny-test.bin", speechModel);
  files.files.set("/whisper/not-a-model.bin", Buffer.from("<!doctype html><title>Sign in</title>"));
  dataDir = tempDataDir();
  scratch = mkdtempSync(join(tmpdir(), "svc-speech-"));
});

afterAll(async () => {
  if (server) expect(await server.stop()).toBe(0);
  await files.close();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

function contentOf(id: string): string {
  return (JSON.parse(readFileSync(join(dataDir, "files", id, "content.json"), "utf8")) as { text: string }).text;
}

async function upload(data: Buffer, name: string): Promise<FileOut> {
  return (await client.files.create({ file: await toFile(data, name), purpose: "user_data" })) as FileOut;
}

/** What whisper.cpp itself says for a file's audio with the generated model: the binding called directly. */
async function engineSays(path: string): Promise<{ text: string; t0: number; t1: number }[]> {
  const whisper = require("@fugood/whisper.node") as {
    initWhisper(o: { filePath: string; useGpu: boolean }, variant: string): Promise<{
      transcribeData(a: ArrayBuffer, o: object): { promise: Promise<{ segments: { text: string; t0: number; t1: number }[] }> };
      release(): Promise<void>;
    }>;
  };
  const context = await whisper.initWhisper({ filePath: join(dataDir, "models", "speech", "ggml-tiny-test.bin"), useGpu: false }, "default");
  const pcm = toPcm16(await decodeAudio(path, 3600));
  const result = await context.transcribeData(pcm.buffer as ArrayBuffer, { language: "en", maxThreads: 1 }).promise;
  await context.release();
  return result.segments.filter((s) => s.text.trim() !== "");
}

const NONSENSE_WORD = new RegExp(`^(${TINY_WHISPER_SYLLABLES.join("|")})+$`);

describe("the speech model through `svc models`", () => {
  it("refuses a download that is not a whisper.cpp model, and keeps nothing", async () => {
    const result = await runSvcAsync(["models", "pull", "--speech", `${files.url}/whisper/not-a-model.bin`, "--data-dir", dataDir]);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/not a usable model: it is not a whisper\.cpp speech model \(no ggml magic at its start\)\. The file was deleted\./);
    expect(existsSync(join(dataDir, "models", "speech", "not-a-model.bin"))).toBe(false);
    expect(runSvc(["models", "list", "--data-dir", dataDir]).stdout).toContain(
      "No speech model: audio and video uploads get no transcript. `svc models pull --speech` downloads Whisper base (multilingual), about 148 MB.",
    );
  });

  it("pulls the model into models/speech, makes it the speech model and lists it apart from the language models", async () => {
    const result = await runSvcAsync(["models", "pull", "--speech", `${files.url}/whisper/ggml-tiny-test.bin`, "--data-dir", dataDir]);
    expect(result.stderr).toContain("Downloading ggml-tiny-test.bin (4.29 MB)");
    expect(result.stdout).toMatch(/Downloaded ggml-tiny-test\.bin \(4\.29 MB, whisper F32\) in .*\.\nIt is now the speech model: audio and video uploads get transcripts made with it\./);
    expect(result.status).toBe(0);
    expect(readFileSync(join(dataDir, "models", "speech", "ggml-tiny-test.bin")).equals(speechModel)).toBe(true);
    const listed = runSvc(["models", "list", "--data-dir", dataDir]);
    expect(listed.stdout).toContain("No models in"); // the language models are apart: none pulled here
    expect(listed.stdout).toMatch(/Speech models \(transcripts of audio and video\) in .*models\/speech:\n\* ggml-tiny-test\.bin +4\.29 MB  whisper F32\n\* in use: uploads are transcribed with ggml-tiny-test\.bin/);
    const json = JSON.parse(runSvc(["models", "list", "--json", "--data-dir", dataDir]).stdout) as { active: string | null; speech: { active: string; models: { file: string; source: string }[] } };
    expect(json.active).toBeNull();
    expect(json.speech).toMatchObject({ active: "ggml-tiny-test.bin", models: [{ file: "ggml-tiny-test.bin", architecture: "whisper", source: `${files.url}/whisper/ggml-tiny-test.bin` }] });
  });
});

describe("uploads transcribed by whisper.cpp", () => {
  beforeAll(async () => {
    const key = createKey(dataDir);
    server = await startSvc({ model: inject("tinyModelPath"), dataDir, args: ["--sequences", "1", "--context-size", "4096"] });
    client = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
  });

  it("a WAV's content is whisper.cpp's transcript with timestamps, exactly what the engine says for that audio", async () => {
    const wav = toneWav(3);
    const path = join(scratch, "tone.wav");
    writeFileSync(path, wav);
    const file = await upload(wav, "tone.wav");
    expect(file).toMatchObject({ status: "processed", content_kind: "audio" });
    const content = contentOf(file.id);
    expect(content).toMatch(/^Audio: 3\.0 seconds, audio pcm_s16le\.\n\nTranscript \(speech recognition by whisper model \(English\), language en; it can mishear\):\n/);
    const lines = content.split("\n").slice(3);
    const said = await engineSays(path);
    expect(said.length).toBeGreaterThan(0);
    expect(lines).toHaveLength(said.length);
    lines.forEach((line, i) => {
      const [, from, to, text] = /^\[(\d+:\d\d)–(\d+:\d\d)\] (.+)$/.exec(line) ?? [];
      expect(text).toBe(said[i]!.text.trim());
      expect(from).toBe(`0:0${Math.min(3, Math.floor(said[i]!.t0 / 1000))}`);
      expect(to).toBe(`0:0${Math.min(3, Math.floor(said[i]!.t1 / 1000))}`);
      // Words of the generated model's vocabulary: it came from the model, not from a fixed string.
      for (const word of text!.split(" ")) expect(word).toMatch(NONSENSE_WORD);
    });
    expect(file.token_estimate).toBe(Math.ceil(`<file name="tone.wav" type="${file.mime_type}">\n${content}\n</file>`.length / 4));
  });

  it("a video gets its transcript and its keyframes' text", async () => {
    const mp4 = captionMp4(2, "Heron launch");
    const file = await upload(mp4, "clip.mp4");
    expect(file).toMatchObject({ status: "processed", content_kind: "video" });
    const content = contentOf(file.id);
    expect(content).toMatch(/^Video: 2\.\d seconds, video h264 640×240, audio \w+\.\n\nTranscript \(speech recognition by whisper model \(English\), language en; it can mishear\):\n\[0:0\d–0:0\d\] [a-z]+/);
    expect(content).toContain("Heron launch");
    expect(content).not.toContain("No transcript is available");
  });

  it("without a speech model (removed while the server runs) uploads succeed and say no transcript is available", async () => {
    const refused = runSvc(["models", "remove", "--speech", "ggml-tiny-test.bin", "--data-dir", dataDir]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain("ggml-tiny-test.bin is the speech model in use. Remove it with --force");
    const removed = runSvc(["models", "remove", "--speech", "ggml-tiny-test.bin", "--force", "--data-dir", dataDir]);
    expect(removed.stdout).toContain("Removed ggml-tiny-test.bin.\nIt was the speech model in use: uploads get no transcript until another is pulled or chosen.");
    const file = await upload(toneWav(1), "later.wav");
    expect(file).toMatchObject({ status: "processed", content_kind: "audio" });
    expect(contentOf(file.id)).toBe(
      "Audio: 1.0 seconds, audio pcm_s16le.\n\nNo transcript is available: this server has no speech recognition model, so what is said in it is unknown.",
    );
  });
});
