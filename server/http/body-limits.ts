// Limits on a parsed JSON body that the byte limit does not give: how deep it nests. Bodies nested
// thousands of levels deep parse fine (V8's JSON.parse does not recurse) but overflow the stack later, in
// whatever walks them (JSON.stringify of a tool_use input, a schema compiler): a 500 instead of a 400. One
// check for every route, before validation, refuses them with a 400 that names the limit.
import { AppError } from "../core/errors.js";
import { deeperThan } from "../core/json-depth.js";

/** JSON nesting levels of a request body; a schema inside one has its own, lower limit. */
export const MAX_BODY_DEPTH = 512;

export function checkBodyDepth(body: unknown): void {
  const where = deeperThan(body, MAX_BODY_DEPTH);
  if (where !== null)
    throw new AppError("invalid_request", `The JSON body is nested more than ${MAX_BODY_DEPTH} levels deep${where ? ` (in ${where})` : ""}, the limit.`, {
      code: "nesting_too_deep",
      param: where || undefined,
    });
}
