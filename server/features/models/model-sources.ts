// Where a model can come from, and the one we recommend. Pure: parsing and validation only.
import { isLoopbackHost } from "../../core/loopback.js";
import { AppError } from "../../core/errors.js";

/**
 * The recommended default: Qwen3 4B in Q4_K_M from Qwen's own GGUF repository. A hybrid reasoning model
 * (its chat template renders thinking on and off, the two modes of the API), trained for tool calling with
 * <tool_call> blocks, 32k tokens of training context, and about 2.5 GB on disk, so it runs on an ordinary
 * 8 GB laptop on the CPU and fast on any GPU with 4 GB or more.
 */
export const RECOMMENDED_MODEL = {
  source: "hf:Qwen/Qwen3-4B-GGUF:Q4_K_M",
  /** The name node-llama-cpp's downloader gives the file. */
  file: "hf_Qwen_Qwen3-4B.Q4_K_M.gguf",
  title: "Qwen3 4B (Q4_K_M)",
  approxBytes: 2_500_000_000,
  description:
    "A small reasoning model by Alibaba's Qwen team: thinking on and off in one model, tool calling, " +
    "32k context. About 2.5 GB; runs on an 8 GB laptop.",
  license: "Apache-2.0",
} as const;

export type RecommendedModel = typeof RECOMMENDED_MODEL;

/**
 * The vision model the first run offers beside the recommended one (issue 39): Gemma 3 4B in Q4_K_M from
 * ggml-org's GGUF repository, whose manifest names its vision projector (`mmproj-*.gguf`), fetched with it
 * (docs/api.md, "Images"). It reads screenshots, photos and scanned pages; llama.cpp's vision library has
 * supported it since it came out. About 2.5 GB and 0.85 GB for the projector.
 */
export const RECOMMENDED_VISION_MODEL = {
  source: "hf:ggml-org/gemma-3-4b-it-GGUF:Q4_K_M",
  file: "hf_ggml-org_gemma-3-4b-it.Q4_K_M.gguf",
  title: "Gemma 3 4B (Q4_K_M)",
  /** The model and its projector. */
  approxBytes: 3_340_000_000,
  description:
    "A small model by Google that also sees images: drop a screenshot, a photo or a scanned page into the chat " +
    "and ask about it. About 3.3 GB with its vision projector; runs on an 8 GB laptop.",
  license: "Gemma Terms of Use",
} as const;

export interface SuggestedModel {
  source: string;
  /** The name node-llama-cpp's downloader gives the file. */
  file: string;
  title: string;
  /** Download size. */
  approxBytes: number;
  /** Memory it needs to run with a few thousand tokens of context: the weights plus KV cache and buffers. */
  needsBytes: number;
  description: string;
  /** It comes with a vision projector: the model sees images. */
  vision?: boolean;
}

/**
 * A short list, smallest first, from Qwen's own GGUF repositories (the same chat template and both modes as
 * the recommended model), so that every machine finds one that fits, and one that sees images (Gemma 3 4B):
 * see docs/configuration.md.
 */
export const SUGGESTED_MODELS: readonly SuggestedModel[] = [
  {
    source: "hf:Qwen/Qwen3-0.6B-GGUF:Q8_0",
    file: "hf_Qwen_Qwen3-0.6B.Q8_0.gguf",
    title: "Qwen3 0.6B (Q8_0)",
    approxBytes: 640_000_000,
    needsBytes: 1_500_000_000,
    description: "Tiny and quick on any computer; simple questions only.",
  },
  {
    source: "hf:Qwen/Qwen3-1.7B-GGUF:Q8_0",
    file: "hf_Qwen_Qwen3-1.7B.Q8_0.gguf",
    title: "Qwen3 1.7B (Q8_0)",
    approxBytes: 1_830_000_000,
    needsBytes: 3_000_000_000,
    description: "For 4 GB machines; everyday questions, short texts.",
  },
  {
    source: RECOMMENDED_MODEL.source,
    file: RECOMMENDED_MODEL.file,
    title: RECOMMENDED_MODEL.title,
    approxBytes: RECOMMENDED_MODEL.approxBytes,
    needsBytes: 4_000_000_000,
    description: "Recommended: good answers and tool calling on an 8 GB laptop.",
  },
  {
    source: RECOMMENDED_VISION_MODEL.source,
    file: RECOMMENDED_VISION_MODEL.file,
    title: RECOMMENDED_VISION_MODEL.title,
    approxBytes: RECOMMENDED_VISION_MODEL.approxBytes,
    needsBytes: 5_000_000_000,
    description: "Sees images too (screenshots, photos, scanned pages); its vision projector comes with it.",
    vision: true,
  },
  {
    source: "hf:Qwen/Qwen3-8B-GGUF:Q4_K_M",
    file: "hf_Qwen_Qwen3-8B.Q4_K_M.gguf",
    title: "Qwen3 8B (Q4_K_M)",
    approxBytes: 5_030_000_000,
    needsBytes: 7_000_000_000,
    description: "Better reasoning and code; wants 16 GB of memory or a 8 GB GPU.",
  },
  {
    source: "hf:Qwen/Qwen3-14B-GGUF:Q4_K_M",
    file: "hf_Qwen_Qwen3-14B.Q4_K_M.gguf",
    title: "Qwen3 14B (Q4_K_M)",
    approxBytes: 9_000_000_000,
    needsBytes: 12_000_000_000,
    description: "The strongest here; wants 24 GB of memory or a 12 GB GPU.",
  },
];

export type ModelFit = "fits_gpu" | "fits" | "tight" | "too_big";

/**
 * How well a model suits this machine: on a GPU when its free VRAM holds the whole model, else by the
 * memory the system has (a model may take about 60% of it comfortably, up to 85% with little else open).
 */
export function fitOf(model: Pick<SuggestedModel, "needsBytes">, machine: { ramTotalBytes: number; vramTotalBytes: number; gpu: boolean }): ModelFit {
  if (machine.gpu && machine.vramTotalBytes >= model.needsBytes) return "fits_gpu";
  if (model.needsBytes <= machine.ramTotalBytes * 0.6) return "fits";
  if (model.needsBytes <= machine.ramTotalBytes * 0.85) return "tight";
  return "too_big";
}

export interface ModelSource {
  kind: "hf" | "url";
  /** The string handed to the downloader. */
  uri: string;
  /** The URL whose host must be reachable (the Hugging Face endpoint for hf: URIs). */
  origin: URL;
}

/** node-llama-cpp's rule: MODEL_ENDPOINT, then HF_ENDPOINT, then huggingface.co. */
export function huggingFaceEndpoint(env: NodeJS.ProcessEnv = process.env): URL {
  for (const value of [env.MODEL_ENDPOINT, env.HF_ENDPOINT]) {
    if (!value) continue;
    try {
      const url = new URL(value);
      if (url.protocol === "http:" || url.protocol === "https:") return url;
    } catch {
      // not a URL: the library ignores it too
    }
  }
  return new URL("https://huggingface.co/");
}

const USAGE = "Use hf:user/repo:quant, hf:user/repo/file.gguf or an https:// URL of a .gguf file.";

/** Parses what the user typed; "" and "recommended" mean the recommended model. Throws AppError (400). */
export function parseModelSource(input: string | undefined, env: NodeJS.ProcessEnv = process.env): ModelSource {
  const text = (input ?? "").trim();
  if (text === "" || text === "recommended") return parseModelSource(RECOMMENDED_MODEL.source, env);
  const invalid = (why: string) => new AppError("invalid_request", `'${text}' is not a model source: ${why} ${USAGE}`, { code: "invalid_model_source" });

  const hf = /^(?:hf|huggingface):(?:\/\/)?(.*)$/i.exec(text);
  if (hf) {
    const rest = hf[1]!;
    const [user, repoAndTag, ...path] = rest.split("/");
    const repo = repoAndTag?.split(":")[0];
    if (!user || !repo) throw invalid("a Hugging Face source names a user and a repository.");
    if (path.length > 0 && !/\.gguf(#.*)?$/i.test(path.join("/"))) throw invalid("a file inside a repository must be a .gguf file.");
    return { kind: "hf", uri: `hf:${rest}`, origin: huggingFaceEndpoint(env) };
  }

  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalid("it is neither an hf: URI nor a URL.");
  }
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname))
    throw invalid("plain http:// is accepted only from this machine (localhost); use https:// so the file cannot be altered on the way.");
  if (url.protocol !== "https:" && url.protocol !== "http:") throw invalid(`${url.protocol} URLs are not supported.`);
  return { kind: "url", uri: url.href, origin: url };
}

/** A SHA-256 as 64 hex characters, lower-cased; throws AppError for anything else. */
export function parseSha256(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const hex = value.trim().toLowerCase().replace(/^sha256:/, "");
  if (!/^[0-9a-f]{64}$/.test(hex))
    throw new AppError("invalid_request", `--sha256 takes 64 hexadecimal characters (got '${value}').`, { code: "invalid_sha256" });
  return hex;
}

/**
 * The recommended speech model for transcripts of audio and video uploads: whisper base (multilingual, it
 * detects the language) from the whisper.cpp project's own repository, in whisper.cpp's ggml format. About
 * 148 MB; a minute of speech takes seconds on a laptop's CPU. `svc models pull --speech small` (466 MB)
 * hears better; the `.en` models are for English only.
 */
export const RECOMMENDED_SPEECH_MODEL = {
  source: "hf:ggerganov/whisper.cpp/ggml-base.bin",
  file: "ggml-base.bin",
  title: "Whisper base (multilingual)",
  approxBytes: 148_000_000,
  license: "MIT",
} as const;

const SPEECH_USAGE =
  "Use a whisper.cpp model name (tiny, base, small, medium, large-v3-turbo, base.en, ...), hf:user/repo/file.bin or an https:// URL of a whisper.cpp model file.";

/**
 * A speech model's source: "" or "recommended" (whisper base), a name from the whisper.cpp repository
 * ("small" → hf:ggerganov/whisper.cpp/ggml-small.bin), hf:user/repo/path/file.bin, or a URL. hf: sources
 * become the repository's download URL (the hf: manifest lookup is for GGUF repositories). Throws AppError (400).
 */
export function parseSpeechModelSource(input: string | undefined, env: NodeJS.ProcessEnv = process.env): ModelSource {
  const text = (input ?? "").trim();
  if (text === "" || text === "recommended") return parseSpeechModelSource(RECOMMENDED_SPEECH_MODEL.source, env);
  const invalid = (why: string) => new AppError("invalid_request", `'${text}' is not a speech model source: ${why} ${SPEECH_USAGE}`, { code: "invalid_model_source" });
  if (/^[a-z0-9][a-z0-9._-]*$/i.test(text) && !text.includes("..")) {
    const name = text.replace(/^ggml-/i, "").replace(/\.bin$/i, "");
    return parseSpeechModelSource(`hf:ggerganov/whisper.cpp/ggml-${name}.bin`, env);
  }
  const hf = /^(?:hf|huggingface):(?:\/\/)?(.*)$/i.exec(text);
  if (hf) {
    const [user, repo, ...path] = hf[1]!.split("/");
    if (!user || !repo || path.length === 0 || path.some((p) => p === "" || p === ".." || p === "."))
      throw invalid("a Hugging Face source names a user, a repository and the file in it.");
    if (/\.gguf$/i.test(path.join("/"))) throw invalid("a .gguf file is a language model; speech models are whisper.cpp .bin files.");
    const endpoint = huggingFaceEndpoint(env);
    const url = new URL(`${[user, repo].map(encodeURIComponent).join("/")}/resolve/main/${path.map(encodeURIComponent).join("/")}`, endpoint.href.endsWith("/") ? endpoint : `${endpoint.href}/`);
    return { kind: "hf", uri: url.href, origin: endpoint };
  }
  const source = (() => {
    try {
      return parseModelSource(text, env);
    } catch (err) {
      throw invalid((err as AppError).message.replace(/^.*?is not a model source: /, "").replace(USAGE, "").trim());
    }
  })();
  if (source.kind !== "url") throw invalid("");
  return source;
}
