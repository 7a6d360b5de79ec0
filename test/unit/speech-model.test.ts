// The speech model file check (whisper.cpp's ggml format) and where `svc models pull --speech` fetches from.
import { describe, expect, it } from "vitest";
import { buildTinyModel } from "../../resources/test-model/tiny-model.js";
import { buildTinyWhisperModel, tinyWhisperToken } from "../../resources/test-model/tiny-whisper.js";
import { parseSpeechModelSource, RECOMMENDED_SPEECH_MODEL } from "../../server/features/models/model-sources.js";
import { defaultSpeechThreads } from "../../server/ingest/speech.js";
import { InvalidSpeechModelError, parseWhisperHeader } from "../../server/ingest/whisper-model.js";

const model = buildTinyWhisperModel();

/** The generated model with token `index`'s text replaced (same length keeps the layout intact). */
function withToken(index: number, text: string): Buffer {
  const copy = Buffer.from(model);
  const original = Buffer.from(tinyWhisperToken(index), "utf8");
  const at = copy.indexOf(Buffer.concat([Buffer.from(Uint32Array.of(original.length).buffer), original]), 4 + 44 + 8 + 80 * 201 * 4);
  expect(at).toBeGreaterThan(0);
  Buffer.from(text, "utf8").copy(copy, at + 4);
  return copy;
}

describe("whisper.cpp model files", () => {
  it("reads the generated test model: an English-only model of one layer, F32, with its vocabulary", () => {
    const summary = parseWhisperHeader(model, model.length);
    expect(summary).toMatchObject({
      hparams: { nVocab: 51864, nAudioCtx: 1500, nAudioState: 16, nAudioLayer: 1, nTextCtx: 448, nMels: 80, ftype: 0 },
      size: "unknown",
      multilingual: false,
      weights: "F32",
      fileBytes: model.length,
    });
    // Generated with a seed: the same bytes every time, another seed other weights.
    expect(buildTinyWhisperModel().equals(model)).toBe(true);
    expect(buildTinyWhisperModel({ seed: 7 }).equals(model)).toBe(false);
  });

  it("refuses what whisper.cpp cannot transcribe with: a GGUF, a vocabulary without ' ', a file without weights, noise", () => {
    const refuse = (bytes: Buffer) => expect(() => parseWhisperHeader(bytes, bytes.length)).toThrow(InvalidSpeechModelError);
    expect(() => parseWhisperHeader(buildTinyModel(), 1e6)).toThrow(/GGUF file: a language model, not a speech model/);
    expect(() => parseWhisperHeader(withToken(0, "!"), model.length)).toThrow(/lacks the " " token/);
    const vocabularyEnd = 4 + 44 + 8 + 80 * 201 * 4 + 4 + Array.from({ length: 50256 }, (_, i) => 4 + Buffer.byteLength(tinyWhisperToken(i))).reduce((a, b) => a + b, 0);
    expect(() => parseWhisperHeader(model.subarray(0, vocabularyEnd), vocabularyEnd)).toThrow(/holds no weights/);
    expect(() => parseWhisperHeader(model.subarray(0, 1000), 1000)).toThrow(/ends inside its header/);
    refuse(Buffer.from("<!doctype html><title>Sign in</title>"));
    const wrongMels = Buffer.from(model);
    wrongMels.writeInt32LE(64, 4 + 9 * 4);
    refuse(wrongMels);
  });

  it("uses half the cores for transcripts, at least 1 and at most 4", () => {
    expect([1, 2, 3, 4, 8, 16, 64].map((cores) => defaultSpeechThreads(cores))).toEqual([1, 1, 1, 2, 4, 4, 4]);
  });
});

describe("speech model sources", () => {
  const env = { HF_ENDPOINT: "http://127.0.0.1:9/" };

  it("defaults to whisper base from the whisper.cpp repository; names and hf: paths become its download URLs", () => {
    expect(RECOMMENDED_SPEECH_MODEL.source).toBe("hf:ggerganov/whisper.cpp/ggml-base.bin");
    expect(parseSpeechModelSource(undefined, {}).uri).toBe("https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-base.bin");
    expect(parseSpeechModelSource("recommended", {}).uri).toBe("https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-base.bin");
    expect(parseSpeechModelSource("small", env)).toMatchObject({ kind: "hf", uri: "http://127.0.0.1:9/ggerganov/whisper.cpp/resolve/main/ggml-small.bin" });
    expect(parseSpeechModelSource("ggml-large-v3-turbo-q5_0.bin", env).uri).toBe("http://127.0.0.1:9/ggerganov/whisper.cpp/resolve/main/ggml-large-v3-turbo-q5_0.bin");
    expect(parseSpeechModelSource("base.en", env).uri).toBe("http://127.0.0.1:9/ggerganov/whisper.cpp/resolve/main/ggml-base.en.bin");
    expect(parseSpeechModelSource("hf:someone/whisper-models/sub/my model.bin", env).uri).toBe(
      "http://127.0.0.1:9/someone/whisper-models/resolve/main/sub/my%20model.bin",
    );
    expect(parseSpeechModelSource("https://example.com/w/ggml-tiny.bin", {})).toMatchObject({ kind: "url", uri: "https://example.com/w/ggml-tiny.bin" });
  });

  it("refuses GGUF files, hf: sources without a file, and plain http:// from elsewhere, saying what works", () => {
    expect(() => parseSpeechModelSource("hf:Qwen/Qwen3-4B-GGUF/qwen3-4b-q4_k_m.gguf", env)).toThrow(/a \.gguf file is a language model/);
    expect(() => parseSpeechModelSource("hf:ggerganov/whisper.cpp", env)).toThrow(/names a user, a repository and the file in it/);
    expect(() => parseSpeechModelSource("http://example.com/ggml-base.bin", env)).toThrow(/plain http:\/\/ is accepted only from this machine/);
    expect(() => parseSpeechModelSource("ftp://example.com/ggml-base.bin", env)).toThrow(/whisper\.cpp model name/);
  });
});
