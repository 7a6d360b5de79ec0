// Content-part decoding shared by the OpenAI-style surfaces (Chat Completions and Responses). Both accept a
// message's content as a string or as an array of typed part objects, and both name a bad part by its place
// (`messages[0].content[2]`, `input[1].content[0]`). What differs is the parts themselves (Chat's `text`,
// `image_url`, `file`; Responses' `input_text`, `input_image`, `input_file`), so each surface passes its own
// part decoder and keeps its own part names, messages and params; this module only walks the list.
import { invalidRequest } from "../core/errors.js";
import type { ContentPart, FileSource } from "../core/inference.js";
import { checkListLength, MAX_CONTENT_PARTS } from "./list-limits.js";
import { sourceOfDataUrl } from "./request-params.js";

export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * A content value → one result a part: a string is one text part (`text(content)`); an array is checked
 * against MAX_CONTENT_PARTS and each of its objects is decoded by `part`, which gets the part's param
 * (`${where}[j]`). Anything else, or a part that is not an object, is a 400 naming where it stands.
 */
export function mapContentParts<T>(
  content: unknown,
  where: string,
  text: (text: string) => T,
  part: (part: Obj, at: string) => T,
): T[] {
  if (typeof content === "string") return [text(content)];
  if (!Array.isArray(content)) throw invalidRequest("Content must be a string or an array of content parts.", where);
  checkListLength(content, MAX_CONTENT_PARTS, where);
  return content.map((raw: unknown, j) => {
    const at = `${where}[${j}]`;
    if (!isObj(raw)) throw invalidRequest("A content part must be an object.", at);
    return part(raw, at);
  });
}

/** The same walk for content that is only text (system, assistant and tool messages): the parts' texts joined. */
export function joinContentText(content: unknown, where: string, part: (part: Obj, at: string) => string): string {
  return mapContentParts(content, where, (text) => text, part).join("");
}

/** A text part's `text`, or a 400 naming `${at}.text`; `label` is how the message calls the part. */
export function partText(part: Obj, at: string, label = `An ${String(part.type)} part`): string {
  if (typeof part.text !== "string") throw invalidRequest(`${label} needs a string 'text'.`, `${at}.text`);
  return part.text;
}

/** A text ContentPart. */
export const textPart = (text: string): ContentPart => ({ type: "text", text });

/** An image or file URL as a file source: a data URL carries its bytes, any other URL is fetched later. */
export function sourceOfUrl(url: string): FileSource {
  return sourceOfDataUrl(url) ?? { kind: "url", url };
}
