// Limits on a JSON body that the byte limit does not give, checked on its bytes as they arrive, before it is
// parsed (core/json-scan.ts), so that what a body costs follows its bytes, not its items:
// - how deep it nests: bodies nested thousands of levels deep parse fine (V8's JSON.parse does not recurse)
//   but overflow the stack later, in whatever walks them (JSON.stringify of a tool_use input, a schema
//   compiler): a 500 instead of a 400;
// - how many values it holds: parsing, validating and decoding pay per item (a million empty content parts
//   in 30 MB held the event loop about a second). Each list has a bound of its own besides
//   (surfaces/list-limits.ts), named in its 400.
// A body past a limit is read to its end (so the client can read the answer) but neither kept nor decoded:
// what it leaves is a network chunk's worth of young garbage at a time, so it needs no full collection after
// it either (memory.ts).
import type { FastifyRequest } from "fastify";
import type { Readable } from "node:stream";
import { AppError } from "../core/errors.js";
import { JsonTextScanner, type JsonTextProblem } from "../core/json-scan.js";

/** JSON nesting levels of a request body; a schema inside one has its own, lower limit. */
export const MAX_BODY_DEPTH = 512;
/** Array items and object members of a request body, all levels together. */
export const MAX_BODY_VALUES = 200_000;

/** Requests whose body was refused by its bytes, unread: nothing of them lasts past a young collection. */
const refused = new WeakSet<object>();

export function bodyWasRefused(request: FastifyRequest): boolean {
  return refused.has(request.raw);
}

/** The 400 for a body past a limit. */
export function bodyLimitError(problem: JsonTextProblem): AppError {
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

/** The 400 for a whole body (its UTF-8 bytes) past a limit, or null. */
export function checkJsonBody(body: Buffer): AppError | null {
  const problem = new JsonTextScanner({ maxDepth: MAX_BODY_DEPTH, maxValues: MAX_BODY_VALUES }).push(body);
  return problem ? bodyLimitError(problem) : null;
}

/**
 * Reads a JSON body as a Fastify content-type parser: checks its bytes as they arrive, enforces the route's
 * byte limit and Content-Length as Fastify's own reader does, and hands the text of a body within every
 * limit to `parse`.
 */
export function readJsonBody(
  request: FastifyRequest,
  payload: Readable,
  limit: number,
  parse: (text: string, done: (err: Error | null, body?: unknown) => void) => void,
  done: (err: Error | null, body?: unknown) => void,
): void {
  const contentLength = Number(request.headers["content-length"]);
  const tooLarge = () => new AppError("payload_too_large", `The request body is larger than the ${Math.round(limit / 2 ** 20)} MB limit.`, { code: "request_too_large" });
  if (contentLength > limit) return done(tooLarge());
  const scanner = new JsonTextScanner({ maxDepth: MAX_BODY_DEPTH, maxValues: MAX_BODY_VALUES });
  const chunks: Buffer[] = [];
  let received = 0;
  const stop = () => {
    payload.removeListener("data", onData);
    payload.removeListener("end", onEnd);
    payload.removeListener("error", onError);
  };
  function onData(chunk: Buffer | string): void {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    received += bytes.length;
    if (received > limit) {
      stop();
      return done(tooLarge());
    }
    if (scanner.problem) return;
    if (scanner.push(bytes)) chunks.length = 0;
    else chunks.push(bytes);
  }
  function onEnd(): void {
    stop();
    if (scanner.problem) {
      refused.add(request.raw);
      return done(bodyLimitError(scanner.problem));
    }
    if (!Number.isNaN(contentLength) && received !== contentLength)
      return done(new AppError("invalid_request", "The Content-Length header does not match the body.", { code: "invalid_content_length" }));
    parse((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received)).toString("utf8"), done);
  }
  function onError(err: Error): void {
    stop();
    done(err);
  }
  payload.on("data", onData);
  payload.on("end", onEnd);
  payload.on("error", onError);
  payload.resume();
}
