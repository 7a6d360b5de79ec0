// Reads what a GGUF file says about itself (architecture, quantisation, name) and checks that a file is a
// whole GGUF model: the header parses and the file is long enough to hold every tensor the header lists.
import { stat } from "node:fs/promises";
import { GgmlType, GgufFileType, GgufInsights, readGgufFileInfo, type GgufFileInfo, type GgufTensorInfo } from "node-llama-cpp";

export interface GgufSummary {
  architecture: string | null;
  /** general.name, e.g. "Qwen3 4B". */
  name: string | null;
  /** general.size_label, e.g. "4B". */
  sizeLabel: string | null;
  /** e.g. Q4_K_M, from general.file_type, or the dominant tensor type when the file does not say. */
  quantization: string | null;
  /** Tokens the model was trained on. */
  contextLength: number | null;
  hasChatTemplate: boolean;
  /** Number of files of a split model (1 for a single file). */
  parts: number;
}

/**
 * [elements per block, bytes per block] of the common ggml types, for a fast completeness check that needs no
 * native library. Types not listed (and any file this check finds short) go to the library's own count.
 */
const BLOCK_LAYOUT: Partial<Record<string, [number, number]>> = {
  F32: [1, 4], F16: [1, 2], BF16: [1, 2], F64: [1, 8], I8: [1, 1], I16: [1, 2], I32: [1, 4], I64: [1, 8],
  Q4_0: [32, 18], Q4_1: [32, 20], Q5_0: [32, 22], Q5_1: [32, 24], Q8_0: [32, 34],
  Q2_K: [256, 84], Q3_K: [256, 110], Q4_K: [256, 144], Q5_K: [256, 176], Q6_K: [256, 210],
  IQ4_NL: [32, 18], IQ4_XS: [256, 136],
};

/** Where the last tensor ends, from the table above; null when a tensor's type is not in it. */
function tensorDataEnd(tensors: readonly GgufTensorInfo[]): number | null {
  let end = 0;
  for (const tensor of tensors) {
    const layout = BLOCK_LAYOUT[GgmlType[tensor.ggmlType] ?? ""];
    if (!layout) return null;
    const elements = tensor.dimensions.reduce<number>((n, d) => n * Number(d), 1);
    end = Math.max(end, Number(tensor.fileOffset) + Math.ceil(elements / layout[0]) * layout[1]);
  }
  return end;
}

/** The file is not a GGUF model, or not all of one. */
export class InvalidModelFileError extends Error {
  override name = "InvalidModelFileError";
}

async function readInfo(path: string): Promise<GgufFileInfo> {
  try {
    return await readGgufFileInfo(path, { logWarnings: false, sourceType: "filesystem" });
  } catch (err) {
    const message = (err as Error).message;
    if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new InvalidModelFileError(`${path} does not exist.`);
    if ((err as Error).constructor?.name === "InvalidGgufMagicError" || /Invalid GGUF magic/i.test(message))
      throw new InvalidModelFileError(`${path} is not a GGUF model file.`);
    throw new InvalidModelFileError(`${path} is not a readable GGUF model file (${message}).`);
  }
}

function quantizationOf(info: GgufFileInfo): string | null {
  const fileType = info.metadata.general?.file_type;
  if (typeof fileType === "number" && GgufFileType[fileType]) return GgufFileType[fileType]!.replace(/^(MOSTLY|ALL)_/, "");
  // Files without general.file_type (the test model is one): name the type holding most of the weights.
  const elements = new Map<number, number>();
  for (const tensor of info.fullTensorInfo ?? info.tensorInfo ?? []) {
    if (tensor.dimensions.length < 2) continue;
    const count = tensor.dimensions.reduce<number>((n, d) => n * Number(d), 1);
    elements.set(tensor.ggmlType, (elements.get(tensor.ggmlType) ?? 0) + count);
  }
  let best: number | null = null;
  for (const [type, count] of elements) if (best === null || count > elements.get(best)!) best = type;
  return best === null ? null : (GgmlType[best] ?? null);
}

function summarize(info: GgufFileInfo): GgufSummary {
  const general = info.metadata.general;
  const architecture = general?.architecture ?? null;
  const archMetadata = architecture ? (info.metadata as unknown as Record<string, { context_length?: number } | undefined>)[architecture] : undefined;
  const tokenizer = info.metadata.tokenizer as { chat_template?: string } | undefined;
  return {
    architecture,
    name: general?.name ?? null,
    sizeLabel: general?.size_label ?? null,
    quantization: quantizationOf(info),
    contextLength: typeof archMetadata?.context_length === "number" ? archMetadata.context_length : null,
    hasChatTemplate: typeof tokenizer?.chat_template === "string" && tokenizer.chat_template.length > 0,
    parts: info.splicedParts,
  };
}

/** What the header says; throws InvalidModelFileError for anything that is not a readable GGUF file. */
export async function readGgufSummary(path: string): Promise<GgufSummary> {
  return summarize(await readInfo(path));
}

/**
 * Checks a downloaded file: a GGUF header that parses, and (for a single file) enough bytes after it for all
 * the tensor data the header describes, so a file cut short is refused even when the server announced the
 * short length. Throws InvalidModelFileError.
 */
export async function verifyGgufFile(path: string): Promise<GgufSummary> {
  const info = await readInfo(path);
  const tensors = info.tensorInfo ?? [];
  const { size } = await stat(path);
  const quickEnd = tensorDataEnd(tensors);
  if (info.splicedParts === 1 && tensors.length > 0 && (quickEnd === null || size < quickEnd)) {
    const first = tensors[0]!;
    const dataStart = Number(BigInt(first.fileOffset) - BigInt(first.offset));
    let tensorBytes: number | null = null;
    try {
      // The authoritative count: ggml's block layouts, from the native library (slow to load, so only here).
      tensorBytes = (await GgufInsights.from(info)).modelSize;
    } catch {
      tensorBytes = null; // no native library to ask: the header check and the announced size stand alone
    }
    if (tensorBytes !== null && size < dataStart + tensorBytes)
      throw new InvalidModelFileError(
        `${path} is incomplete: its header lists ${dataStart + tensorBytes} bytes of model data but the file has ${size}.`,
      );
  }
  return summarize(info);
}
