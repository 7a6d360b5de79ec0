// Limits on a JSON body that the byte limit does not give, checked on its text before it is parsed
// (core/json-scan.ts), so that what a body costs follows its bytes, not its items:
// - how deep it nests: bodies nested thousands of levels deep parse fine (V8's JSON.parse does not recurse)
//   but overflow the stack later, in whatever walks them (JSON.stringify of a tool_use input, a schema
//   compiler): a 500 instead of a 400;
// - how many values it holds: parsing, validating and decoding pay per item (a million empty content parts
//   in 30 MB held the event loop about a second). Each list has a bound of its own besides
//   (surfaces/list-limits.ts), named in its 400.
import { AppError } from "../core/errors.js";
import { checkJsonText } from "../core/json-scan.js";

/** JSON nesting levels of a request body; a schema inside one has its own, lower limit. */
export const MAX_BODY_DEPTH = 512;
/** Array items and object members of a request body, all levels together. */
export const MAX_BODY_VALUES = 200_000;

/** The 400 for JSON text past a limit, or null. */
export function checkJsonBody(text: string): AppError | null {
  const problem = checkJsonText(text, { maxDepth: MAX_BODY_DEPTH, maxValues: MAX_BODY_VALUES });
  if (!problem) return null;
  const where = problem.where;
  if (problem.limit === "depth")
    return new AppError("invalid_request", `The JSON body is nested more than ${MAX_BODY_DEPTH} levels deep${where ? ` (in ${where})` : ""}, the limit.`, {
      code: "nesting_too_deep",
      param: where || undefined,
    });
  return new AppError(
    "invalid_request",
    `The JSON body holds more than ${MAX_BODY_VALUES} values (array items and object members, all levels together)${where ? `; the count passed it in ${where}` : ""}, the limit.`,
    { code: "too_many_items", param: where || undefined },
  );
}
