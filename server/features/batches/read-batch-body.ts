// Reads a create body ({"requests": [...]}, up to 256 MiB) as it arrives: each entry is parsed, checked and
// handed on by itself, so memory holds one network chunk and its entries, never the whole body or every
// parsed entry. The SHA-256 of the body's bytes comes out too (Idempotency-Key compares it).
import { createHash } from "node:crypto";
import { JSONParser } from "@streamparser/json";
import { AppError } from "../../core/errors.js";
import { checkEntry, checkEntrySchemas, isProblem, type EntryProblem, type ValidEntry } from "./batch-entries.js";

export interface ReadOptions {
  maxBytes: number;
  maxRequests: number;
  /** Valid entries, in order, a chunk's worth at a time; not called again once a problem was found. */
  onEntries: (entries: Array<Omit<ValidEntry, "inference"> & { index: number }>) => void;
}

export interface ReadOutcome {
  count: number;
  sha256: string;
  /** The first 100 problems, and how many there were. */
  problems: EntryProblem[];
  problemCount: number;
}

export function tooLarge(maxBytes: number): AppError {
  return new AppError("payload_too_large", `A batch is limited to ${maxBytes / 2 ** 20} MiB; split the requests into several batches.`, {
    code: "request_too_large",
  });
}

function invalidJson(detail: string): AppError {
  return new AppError("invalid_request", `We could not parse the JSON body of your request (${detail}). Send {"requests": [{"custom_id": ..., "params": {...}}]}.`, {
    code: "invalid_json",
  });
}

function notAnArray(): AppError {
  return new AppError("invalid_request", "requests: must be a non-empty array of {custom_id, params}.", { code: "invalid_request", param: "requests" });
}

export async function readBatchBody(body: AsyncIterable<Buffer | string>, options: ReadOptions): Promise<ReadOutcome> {
  const hash = createHash("sha256");
  const seen = new Map<string, number>();
  const problems: EntryProblem[] = [];
  let problemCount = 0;
  let count = 0;
  let bytes = 0;
  let structureError: AppError | null = null;
  let valid: Array<ValidEntry & { index: number }> = [];
  /** Entries whose schemas are still to be compiled (in the schema worker, after each chunk). */
  let unchecked: Array<ValidEntry & { index: number }> = [];

  // keepStack false: entries handed out are dropped from the parser's own copy of the array.
  const parser = new JSONParser({ paths: ["$.requests.*"], keepStack: false, stringBufferSize: 64 * 1024 });
  parser.onValue = ({ value, key }) => {
    if (structureError) return;
    // `requests` given as an object would hand out its properties.
    if (typeof key !== "number") {
      structureError = notAnArray();
      return;
    }
    if (count >= options.maxRequests) {
      structureError = new AppError("invalid_request", `A batch holds at most ${options.maxRequests} requests; split them into several batches.`, {
        code: "too_many_requests_in_batch",
        param: "requests",
      });
      return;
    }
    const entry = checkEntry(value, count, seen);
    count++;
    if (isProblem(entry)) {
      problemCount++;
      if (problems.length < 100) problems.push(entry);
      valid = [];
    } else {
      // Its schemas are checked after the chunk (a problem there is listed too, in order).
      if (problems.length < 100) unchecked.push({ ...entry, index: count - 1 });
      if (problemCount === 0) valid.push({ ...entry, index: count - 1 });
    }
  };

  for await (const chunk of readingOf(body)) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    bytes += buffer.length;
    if (bytes > options.maxBytes) throw tooLarge(options.maxBytes);
    hash.update(buffer);
    try {
      parser.write(buffer);
    } catch (err) {
      throw invalidJson((err as Error).message);
    }
    if (structureError) throw structureError;
    if (unchecked.length > 0) {
      const checking = unchecked;
      unchecked = [];
      // Their schemas are compiled in the schema worker meanwhile (the event loop stays free).
      for (const problem of await Promise.all(checking.map((e) => checkEntrySchemas(e, e.index))))
        if (problem) {
          problemCount++;
          if (problems.length < 100) problems.push(problem);
        }
    }
    if (valid.length > 0) {
      const ready = valid;
      valid = [];
      if (problemCount === 0) options.onEntries(ready.map(({ inference: _, ...entry }) => entry));
    }
  }
  // Schema problems are found after the chunk their entry came in: the list goes in the body's order.
  problems.sort((a, b) => a.index - b.index);
  if (bytes === 0) throw notAnArray();
  // Without a separator the parser ends by itself after one complete value; otherwise the JSON was cut short.
  if (!parser.isEnded) throw invalidJson("the body ended in the middle of the JSON");
  if (count === 0) throw notAnArray();
  return { count, sha256: hash.digest("hex"), problems, problemCount };
}

/** The SHA-256 of a body only (an Idempotency-Key replay compares it), bounded like a real upload. */
export async function hashBody(body: AsyncIterable<Buffer | string>, maxBytes: number): Promise<string> {
  const hash = createHash("sha256");
  let bytes = 0;
  for await (const chunk of readingOf(body)) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    bytes += buffer.length;
    if (bytes > maxBytes) throw tooLarge(maxBytes);
    hash.update(buffer);
  }
  return hash.digest("hex");
}

/** The body's chunks; a connection that breaks off mid-upload is the client's doing (400), not a server error. */
async function* readingOf(body: AsyncIterable<Buffer | string>): AsyncGenerator<Buffer | string> {
  try {
    yield* body;
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw new AppError("invalid_request", "The request body ended before it was complete (the connection was closed).", {
      code: "incomplete_body",
      cause: err,
    });
  }
}
