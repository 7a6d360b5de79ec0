// File and image parts → what the model gets, for every surface: uploaded files by id from the caller's
// account, inline ones through the ingest worker; images kept as images for a model that sees them (a
// vision projector), read by the OCR fallback for one that does not.
import { AppError, invalidRequest } from "../core/errors.js";
import type { CanonicalMessage, ContentPart, InferenceRequest } from "../core/inference.js";
import type { Engine } from "../engine/types.js";
import { formatFileText, type Extracted, type Ingest } from "../ingest/ingest.js";

/** Uploaded files by id, for the caller's account (the Files feature implements it). */
export interface FileResolver {
  /** The extracted content of the caller's file; throws 404 naming the id for a missing or foreign file. */
  contentOf(fileId: string, accountId: string | undefined, param: string): Promise<{ extracted: Extracted; filename: string }>;
  /** The caller's file as uploaded (an image for a model that sees images). */
  bytesOf?(fileId: string, accountId: string | undefined, param: string): Promise<{ bytes: Buffer; mediaType: string; kind: string }>;
}

/** Who is asking: uploaded files are resolved within the caller's account. */
export interface CallerContext {
  accountId?: string;
}

export interface ContentResolver {
  ingest: Ingest;
  files?: FileResolver;
}

/**
 * File and image parts become what the model reads (shared by every surface): uploaded files by id from the
 * caller's account, inline ones through the ingest worker. With `images` "vision" an image part stays an
 * image (scaled, as PNG or JPEG bytes) for the vision encoder; with "ocr" it becomes what the OCR fallback
 * can honestly say about it (see server/ingest).
 */
export async function resolveContent(
  messages: CanonicalMessage[],
  resolver: ContentResolver,
  caller: CallerContext = {},
  images: ImageInput = "ocr",
): Promise<CanonicalMessage[]> {
  const out: CanonicalMessage[] = [];
  for (const [i, message] of messages.entries()) {
    if (!message.content.some((p) => p.type !== "text")) {
      out.push(message);
      continue;
    }
    const content: ContentPart[] = [];
    for (const [j, part] of message.content.entries()) {
      if (part.type === "text") {
        content.push(part);
        continue;
      }
      const param = part.param ?? `messages[${i}].content[${j}]`;
      if (part.type === "image" && images === "vision") {
        content.push(await imageForModel(part, resolver, caller, param));
        continue;
      }
      // An image sent as a file (the window attaches files by id; Chat file_data may be an image) is an image.
      if (images === "vision" && part.source.kind === "base64" && /^image\//i.test(part.source.mediaType)) {
        content.push(await imageForModel({ type: "image", source: part.source, cacheBreakpoint: part.cacheBreakpoint }, resolver, caller, param));
        continue;
      }
      const filename = part.type === "file" ? (part.filename ?? part.title) : undefined;
      let extracted: Extracted;
      let name: string | undefined = filename;
      if (part.source.kind === "file_id") {
        if (!resolver.files)
          throw new AppError("not_found", `No file with id '${part.source.fileId}': this server has no Files API configured.`, { param, code: "file_not_found" });
        const found = await resolver.files.contentOf(part.source.fileId, caller.accountId, param);
        extracted = found.extracted;
        if (part.type === "image" && extracted.kind !== "image")
          throw invalidRequest(`The file '${part.source.fileId}' is not an image (${extracted.mediaType}); send it as a file part.`, param, "invalid_image");
        name = filename ?? found.filename;
      } else {
        extracted = await resolver.ingest.inline({ source: part.source, filename, param, expect: part.type === "image" ? "image" : undefined });
      }
      if (images === "vision" && extracted.kind === "image" && part.type === "file")
        content.push(await imageForModel({ type: "image", source: part.source, cacheBreakpoint: part.cacheBreakpoint }, resolver, caller, param));
      else if (images === "vision" && extracted.visual) content.push(...visualParts(extracted, name, part.cacheBreakpoint, param));
      else content.push({ type: "text", text: formatFileText(extracted, name), cacheBreakpoint: part.cacheBreakpoint });
    }
    out.push({ ...message, content } as CanonicalMessage);
  }
  return out;
}

/**
 * A scanned PDF's pages or a video's keyframes for a model that sees images: the file's block as text, each
 * picture as an image part after its label ("Page 2:", "Keyframe at 0:15:") in place of what OCR read in it.
 */
function visualParts(extracted: Extracted, filename: string | undefined, cacheBreakpoint: boolean | undefined, param: string): ContentPart[] {
  const visual = extracted.visual!;
  const name = (filename ?? (extracted.kind === "pdf" ? "document.pdf" : "document")).replace(/"/g, "'");
  const parts: ContentPart[] = [{ type: "text", text: `<file name="${name}" type="${extracted.mediaType}">\n${visual.text}` }];
  for (const image of visual.images) {
    parts.push({ type: "text", text: image.label });
    parts.push({ type: "image", source: { kind: "base64", mediaType: image.mediaType, data: image.data }, param });
  }
  parts.push({ type: "text", text: `${visual.note ? `${visual.note}\n` : ""}</file>`, cacheBreakpoint });
  return parts;
}

/**
 * How images reach the model: "vision", as images (the loaded model has a projector); "ocr", as the text
 * the OCR fallback reads in them (server/ingest/vision.ts).
 */
export type ImageInput = "vision" | "ocr";

/** What the loaded model does with images. */
export function imageInputOf(engine: Engine): ImageInput {
  return engine.status().model?.vision ? "vision" : "ocr";
}

/**
 * How this request's images reach the model: as images when the model sees them (`model`, imageInputOf),
 * else read by the OCR fallback; `forbidFallback` (X-Image-Input: vision) turns the fallback into a 400.
 */
export function imageInputFor(model: ImageInput, request: Pick<InferenceRequest, "messages">, forbidFallback = false): ImageInput {
  if (countImages(request.messages) === 0) return model;
  if (model === "ocr" && forbidFallback)
    throw new AppError(
      "invalid_request",
      'The loaded model cannot see images (it has no vision projector), and X-Image-Input: vision forbids reading them with OCR instead. Load a vision model (docs/api.md, "Images") or leave the header out.',
      { code: "vision_unavailable", param: "X-Image-Input" },
    );
  return model;
}

/**
 * Token probabilities need the model's logits, and the vision engine (llama.node) reports none before its
 * sampler has cut them down (greedy leaves one token at 1.0): a request that asks for logprobs while the
 * model reads its images is refused rather than answered with an empty list (docs/api.md, "Images").
 */
export function checkVisionLogprobs(request: Pick<InferenceRequest, "logprobs" | "surface">, images: ImageInput, resolved: CanonicalMessage[]): void {
  if (!request.logprobs || images !== "vision" || countImages(resolved) === 0) return;
  const param = request.surface === "responses" ? "include" : "logprobs";
  throw new AppError(
    "invalid_request",
    `Token probabilities are not available when the model reads images itself: its vision engine reports none. Send the request without ${param === "include" ? '"message.output_text.logprobs" in include' : "logprobs"}, or without the images.`,
    { code: "logprobs_unavailable", param },
  );
}

/** An image part kept as an image, its bytes the scaled PNG or JPEG the vision encoder reads. */
export async function imageForModel(part: Extract<ContentPart, { type: "image" }>, resolver: ContentResolver, caller: CallerContext, param: string): Promise<ContentPart> {
  let source: Parameters<Ingest["imageForModel"]>[0] = part.source;
  if (part.source.kind === "file_id") {
    if (!resolver.files?.bytesOf)
      throw new AppError("not_found", `No file with id '${part.source.fileId}': this server has no Files API configured.`, { param, code: "file_not_found" });
    const file = await resolver.files.bytesOf(part.source.fileId, caller.accountId, param);
    if (file.kind !== "image") throw invalidRequest(`The file '${part.source.fileId}' is not an image (${file.mediaType}); send it as a file part.`, param, "invalid_image");
    source = { kind: "bytes", bytes: file.bytes, mediaType: file.mediaType };
  }
  const image = await resolver.ingest.imageForModel(source, param);
  return { type: "image", source: { kind: "base64", mediaType: image.mediaType, data: image.data.toString("base64") }, cacheBreakpoint: part.cacheBreakpoint, param };
}

/** The request's image parts (images in files and documents not counted). */
export function countImages(messages: CanonicalMessage[]): number {
  return messages.reduce((n, m) => n + m.content.filter((p) => p.type === "image").length, 0);
}

