// Audio and video through the ffmpeg binary that @ffmpeg-installer ships inside its npm package: the
// duration probe, keyframes for the vision path, and 16 kHz mono samples for the speech model.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { AppError } from "../core/errors.js";

const require = createRequire(import.meta.url);

export function ffmpegPath(): string {
  // In the packaged app the binary is unpacked beside app.asar (electron-builder.yml): a process cannot start
  // from inside the archive.
  return (require("@ffmpeg-installer/ffmpeg") as { path: string }).path.replace(/app\.asar([\\/])/, "app.asar.unpacked$1");
}

export interface MediaProbe {
  durationSeconds: number | null;
  video: { codec: string; width: number; height: number } | null;
  audio: { codec: string } | null;
}

interface RunResult {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

function run(args: string[], options: { maxStdout?: number; timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(ffmpegPath(), ["-hide_banner", "-nostdin", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let outBytes = 0;
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
    child.stdout.on("data", (chunk: Buffer) => {
      outBytes += chunk.length;
      if (options.maxStdout !== undefined && outBytes > options.maxStdout) child.kill("SIGKILL");
      else out.push(chunk);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 64 * 1024) stderr += chunk.toString("utf8");
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out), stderr });
    });
  });
}

/** Reads the container's duration and first video and audio streams (ffmpeg -i prints them). */
export async function probeMedia(path: string): Promise<MediaProbe> {
  const { stderr } = await run(["-i", path], { timeoutMs: 30_000 });
  if (/Invalid data found|could not find codec parameters|moov atom not found/i.test(stderr) && !/Stream #/.test(stderr))
    throw new AppError("invalid_request", "The audio or video file could not be read (damaged or not a media file).", { code: "invalid_media" });
  const duration = /Duration: (\d+):(\d+):(\d+(?:\.\d+)?)/.exec(stderr);
  const videoLine = /Stream #\S+.*?: Video: (\w+)[^\n]*?, (\d{2,5})x(\d{2,5})/.exec(stderr);
  // Cover art in an MP3 or M4A is a still "video" stream; it does not make the file a video.
  const isCoverArt = videoLine ? /\(attached pic\)/.test(stderr.slice(videoLine.index, stderr.indexOf("\n", videoLine.index))) : false;
  const audioLine = /Stream #\S+.*?: Audio: (\w+)/.exec(stderr);
  return {
    durationSeconds: duration ? Number(duration[1]) * 3600 + Number(duration[2]) * 60 + Number(duration[3]) : null,
    video: videoLine && !isCoverArt ? { codec: videoLine[1]!, width: Number(videoLine[2]), height: Number(videoLine[3]) } : null,
    audio: audioLine ? { codec: audioLine[1]! } : null,
  };
}

/** One PNG frame at `seconds`, scaled to at most 1280 pixels wide. */
export async function frameAt(path: string, seconds: number): Promise<Buffer | null> {
  const { stdout } = await run(
    ["-ss", seconds.toFixed(2), "-i", path, "-frames:v", "1", "-vf", "scale='min(1280,iw)':-2", "-f", "image2pipe", "-vcodec", "png", "-"],
    { maxStdout: 32 * 1024 * 1024, timeoutMs: 60_000 },
  );
  return stdout.length > 0 ? stdout : null;
}

/** The audio as 16 kHz mono 32-bit float samples (what whisper.cpp reads), at most `maxSeconds`. */
export async function decodeAudio(path: string, maxSeconds: number): Promise<Float32Array> {
  const { stdout, code, stderr } = await run(["-i", path, "-t", String(maxSeconds), "-vn", "-ac", "1", "-ar", "16000", "-f", "f32le", "-"], {
    maxStdout: maxSeconds * 16000 * 4 + 1024,
    timeoutMs: 300_000,
  });
  if (code !== 0 && stdout.length === 0)
    throw new AppError("invalid_request", `The audio could not be decoded: ${stderr.trim().split("\n").pop()}`, { code: "invalid_media" });
  const copy = new Uint8Array(stdout.length - (stdout.length % 4));
  copy.set(stdout.subarray(0, copy.length));
  return new Float32Array(copy.buffer);
}

export function formatTimestamp(seconds: number): string {
  const s = Math.floor(seconds);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

export function videoTooLong(seconds: number): AppError {
  return new AppError("payload_too_large", `The video is ${formatTimestamp(seconds)} long; videos may be at most 5 minutes.`, { code: "video_too_long" });
}
