// What a whisper.cpp model file is: the ggml format whisper.cpp loads (magic "ggml", eleven hyperparameters,
// the mel filterbank, the vocabulary, then the tensors). Read here, without the engine, to check a download
// before it is kept and to know whether the model is multilingual. A file that passes these checks is one
// whisper.cpp can transcribe with: a vocabulary without the " " token, for instance, makes whisper_full throw
// (and the binding then never answers), so it is refused here.
import { open } from "node:fs/promises";

export const WHISPER_FILE_MAGIC = 0x67676d6c; // "ggml"
/** Tokens every whisper vocabulary has: text tokens up to 50256, the special tokens, 1501 timestamps. */
const MIN_VOCAB = 51864;
const HEADER_READ_BYTES = 4 * 1024 * 1024;

export class InvalidSpeechModelError extends Error {
  override name = "InvalidSpeechModelError";
}

export interface WhisperHparams {
  nVocab: number;
  nAudioCtx: number;
  nAudioState: number;
  nAudioHead: number;
  nAudioLayer: number;
  nTextCtx: number;
  nTextState: number;
  nTextHead: number;
  nTextLayer: number;
  nMels: number;
  ftype: number;
}

export interface WhisperModelSummary {
  hparams: WhisperHparams;
  /** tiny, base, small, medium, large (by the encoder's layers, as whisper.cpp names them), or unknown. */
  size: string;
  /** Multilingual models detect the language; English-only (".en") models transcribe English. */
  multilingual: boolean;
  /** How the large tensors are stored: F32, F16, Q5_0, ... */
  weights: string;
  fileBytes: number;
}

const SIZE_OF_LAYERS: Record<number, string> = { 4: "tiny", 6: "base", 12: "small", 24: "medium", 32: "large" };
// ggml_ftype values whisper.cpp's quantize tool writes.
const FTYPE_NAMES: Record<number, string> = { 0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K" };

/** Reads and checks a whisper.cpp model file's header and vocabulary. Throws InvalidSpeechModelError. */
export async function readWhisperModel(path: string): Promise<WhisperModelSummary> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (err) {
    throw new InvalidSpeechModelError(`${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}).`);
  }
  try {
    const { size } = await handle.stat();
    const buffer = Buffer.alloc(Math.min(size, HEADER_READ_BYTES));
    await handle.read(buffer, 0, buffer.length, 0);
    return parseWhisperHeader(buffer, size);
  } finally {
    await handle.close();
  }
}

/** Parses the start of a whisper.cpp model file (`head`, of a file `fileBytes` long). */
export function parseWhisperHeader(head: Buffer, fileBytes: number): WhisperModelSummary {
  const notWhisper = (why: string) => new InvalidSpeechModelError(`it is not a whisper.cpp speech model (${why}).`);
  let at = 0;
  const int = (): number => {
    if (at + 4 > head.length) throw notWhisper("the file ends inside its header");
    const value = head.readInt32LE(at);
    at += 4;
    return value;
  };
  if (head.length < 4 || head.readUInt32LE(0) !== WHISPER_FILE_MAGIC) {
    const gguf = head.length >= 4 && head.toString("latin1", 0, 4) === "GGUF";
    throw notWhisper(gguf ? "it is a GGUF file: a language model, not a speech model" : "no ggml magic at its start");
  }
  at = 4;
  const hparams: WhisperHparams = {
    nVocab: int(),
    nAudioCtx: int(),
    nAudioState: int(),
    nAudioHead: int(),
    nAudioLayer: int(),
    nTextCtx: int(),
    nTextState: int(),
    nTextHead: int(),
    nTextLayer: int(),
    nMels: int(),
    ftype: int(),
  };
  const positive = [hparams.nAudioCtx, hparams.nAudioState, hparams.nAudioHead, hparams.nAudioLayer, hparams.nTextCtx, hparams.nTextState, hparams.nTextHead, hparams.nTextLayer];
  if (positive.some((n) => n <= 0 || n > 1_000_000)) throw notWhisper("its hyperparameters are out of range");
  if (hparams.nVocab < MIN_VOCAB || hparams.nVocab > 1_000_000) throw notWhisper(`a vocabulary of ${hparams.nVocab} tokens`);
  if (hparams.nAudioState !== hparams.nTextState) throw notWhisper("the encoder and decoder widths differ");
  if (hparams.nAudioState % hparams.nAudioHead !== 0 || hparams.nTextState % hparams.nTextHead !== 0) throw notWhisper("the heads do not divide the width");
  if (hparams.nMels !== 80 && hparams.nMels !== 128) throw notWhisper(`${hparams.nMels} mel bands`);
  const ftype = hparams.ftype % 1000;
  const weights = FTYPE_NAMES[ftype];
  if (weights === undefined || hparams.ftype < 0) throw notWhisper(`unknown weight type ${hparams.ftype}`);

  const nMel = int();
  const nFft = int();
  // whisper.cpp computes the spectrogram with a 400-sample window: 201 frequency bins.
  if (nMel !== hparams.nMels || nFft !== 201) throw notWhisper("its mel filterbank does not fit its hyperparameters");
  at += nMel * nFft * 4;
  const nTokens = int();
  if (nTokens <= 0 || nTokens > hparams.nVocab) throw notWhisper(`a vocabulary list of ${nTokens} tokens`);
  let hasSpace = false;
  for (let i = 0; i < nTokens; i++) {
    const length = int();
    if (length < 0 || at + length > head.length) throw notWhisper("its vocabulary is cut off");
    if (length === 1 && head[at] === 0x20) hasSpace = true;
    at += length;
  }
  if (!hasSpace) throw notWhisper('its vocabulary lacks the " " token whisper.cpp needs');
  // After the vocabulary come the tensors; a file that stops here has no weights.
  if (fileBytes < at + 12 + 1024) throw notWhisper("it holds no weights after its vocabulary");
  return {
    hparams,
    size: SIZE_OF_LAYERS[hparams.nAudioLayer] ?? "unknown",
    multilingual: hparams.nVocab >= 51865,
    weights,
    fileBytes,
  };
}
