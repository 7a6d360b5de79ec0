// Reads what a GGUF file says about itself (architecture, quantisation, name) and checks that a file is a
// whole GGUF model: the header parses and the file is long enough to hold every tensor the header lists.
import { stat } from "node:fs/promises";
import { GgmlType, GgufFileType, GgufInsights, readGgufFileInfo, type GgufFileInfo } from "node-llama-cpp";

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
  if (info.splicedParts === 1 && tensors.length > 0) {
    const first = tensors[0]!;
    const dataStart = Number(BigInt(first.fileOffset) - BigInt(first.offset));
    let tensorBytes: number | null = null;
    try {
      // Tensor sizes depend on ggml's block layouts, which only the native library knows.
      tensorBytes = (await GgufInsights.from(info)).modelSize;
    } catch {
      tensorBytes = null; // no native library to ask: the header check and the announced size stand alone
    }
    const { size } = await stat(path);
    if (tensorBytes !== null && size < dataStart + tensorBytes)
      throw new InvalidModelFileError(
        `${path} is incomplete: its header lists ${dataStart + tensorBytes} bytes of model data but the file has ${size}.`,
      );
  }
  return summarize(info);
}
