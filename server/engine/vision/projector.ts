// Where a model's vision projector is: the mmproj GGUF a vision-language model ships beside its text model,
// kept next to the model file as "<model name>.mmproj.gguf" (what `svc models pull` writes, and what a user
// who downloads both files does by renaming one). A model with one sees images; one without reads text.
import { existsSync } from "node:fs";

export const PROJECTOR_SUFFIX = ".mmproj.gguf";

/** The projector's path for a model file: "dir/model.gguf" → "dir/model.mmproj.gguf". */
export function projectorPathFor(modelPath: string): string {
  return modelPath.replace(/\.gguf$/i, "") + PROJECTOR_SUFFIX;
}

/** The model's projector when it has one on disk, else undefined. */
export function projectorBeside(modelPath: string): string | undefined {
  if (modelPath.toLowerCase().endsWith(PROJECTOR_SUFFIX)) return undefined;
  const path = projectorPathFor(modelPath);
  return existsSync(path) ? path : undefined;
}
