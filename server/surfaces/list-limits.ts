// How many items a request's lists may hold (docs/api.md, "Limits on lists"), on every surface: each list a
// client can make long is bounded, and one over its bound is a 400 naming the list and the limit (schemas
// bound the top-level lists, decoders the lists inside items). The spec's own bounds (Chat 2000 messages,
// Messages 200, Chat 128 tools) stay as the spec gives them. The body as a whole is bounded too, before it
// is parsed (server/http/body-limits.ts).
import { tooManyItems } from "../core/errors.js";

/** Responses input items (also an agent run's and a compaction's). */
export const MAX_INPUT_ITEMS = 10_000;
/** The content parts (blocks) of one message or item, of one tool output or tool result, of a system prompt. */
export const MAX_CONTENT_PARTS = 1_000;
/** Tools of a Responses or Messages request or an agent run, and the functions of one namespace tool. */
export const MAX_TOOLS = 512;
/** Tool calls of one Chat assistant message. */
export const MAX_TOOL_CALLS = 512;

/** Throws the 400 for a list longer than `limit`; anything that is not an array passes (its type is checked elsewhere). */
export function checkListLength(list: unknown, limit: number, param: string): void {
  if (Array.isArray(list) && list.length > limit) throw tooManyItems(param, limit);
}
