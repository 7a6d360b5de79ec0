// Text and code files: UTF-8, cut at 200,000 characters. Binary data posing as text is refused.
import { AppError } from "../core/errors.js";
import { notTextReason } from "./classify.js";
import { MAX_TEXT_CHARS } from "./types.js";

export function cutText(text: string): { text: string; truncated: boolean } {
  return text.length > MAX_TEXT_CHARS ? { text: text.slice(0, MAX_TEXT_CHARS), truncated: true } : { text, truncated: false };
}

export function decodeTextFile(bytes: Uint8Array, filename: string | undefined): { text: string; truncated: boolean } {
  const reason = notTextReason(bytes, true);
  if (reason) throw new AppError("invalid_request", `${filename ?? "The file"} cannot be read as text: ${reason}.`, { code: "invalid_text_file" });
  // A BOM is not content.
  return cutText(new TextDecoder("utf-8").decode(bytes));
}
