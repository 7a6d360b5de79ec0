// POST/GET /v1/files, GET/DELETE /v1/files/{file_id}: the Files API (OpenAI error shape).
import multipart from "@fastify/multipart";
import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { AppError, invalidRequest } from "../../core/errors.js";
import type { ServerDeps } from "../server-deps.js";
import { MAX_UPLOAD_BYTES, uploadTooLarge } from "./files-service.js";

/** Multipart framing around the file: the fields and boundaries of any client fit well within this. */
const MULTIPART_OVERHEAD = 1024 * 1024;

const ListQuery = Type.Object(
  {
    // Query strings are not coerced (the app's ajv keeps types strict), so numbers arrive as text.
    limit: Type.Optional(Type.String({ pattern: "^[0-9]{1,5}$" })),
    order: Type.Optional(Type.Union([Type.Literal("asc"), Type.Literal("desc")])),
    after: Type.Optional(Type.String()),
    purpose: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

/** @fastify/multipart's own errors (limits, framing) as AppErrors. */
function multipartError(err: unknown): unknown {
  const code = (err as { code?: string }).code;
  if (typeof code !== "string" || !code.startsWith("FST_")) return err;
  if (code === "FST_REQ_FILE_TOO_LARGE") return uploadTooLarge();
  if (code === "FST_FILES_LIMIT") return invalidRequest("Send exactly one file, in a field named 'file'.", "file", "too_many_files");
  if (code === "FST_PARTS_LIMIT" || code === "FST_FIELDS_LIMIT") return invalidRequest("The form has too many fields; send a 'file' and optionally a 'purpose'.", undefined, "too_many_fields");
  if (code === "FST_INVALID_MULTIPART_CONTENT_TYPE") return notMultipart();
  return invalidRequest(`The multipart body could not be read: ${(err as Error).message}.`, undefined, "invalid_multipart");
}

function parseLimit(value: string | undefined): number {
  if (value === undefined) return 100;
  const limit = Number(value);
  if (limit < 1 || limit > 10000) throw invalidRequest("limit must be between 1 and 10000.", "limit", "invalid_limit");
  return limit;
}

function notMultipart(): AppError {
  return invalidRequest("Upload files as multipart/form-data with the file in a field named 'file'.", "file", "invalid_content_type");
}

export async function registerFilesRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  const files = deps.files;
  await app.register(multipart, {
    limits: { fileSize: MAX_UPLOAD_BYTES, files: 1, fields: 10, fieldSize: 64 * 1024, parts: 12, headerPairs: 100 },
    throwFileSizeLimit: true,
  });
  app.post("/v1/files", { bodyLimit: MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD }, async (request) => {
    const length = Number(request.headers["content-length"]);
    if (Number.isFinite(length) && length > MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD) throw uploadTooLarge();
    if (!request.isMultipart()) throw notMultipart();
    const upload = await files.beginUpload(request.ctx.principal!.accountId);
    try {
      let filename: string | undefined;
      let purpose: string | undefined;
      let received = false;
      try {
        for await (const part of request.parts()) {
          if (part.type === "file") {
            if (part.fieldname !== "file") {
              part.file.resume();
              throw invalidRequest(`Unexpected file field '${part.fieldname}'; send the file in a field named 'file'.`, part.fieldname, "invalid_field");
            }
            filename = part.filename;
            await upload.write(part.file);
            received = true;
          } else if (part.fieldname === "purpose") purpose = String(part.value);
        }
      } catch (err) {
        throw multipartError(err);
      }
      if (!received) throw invalidRequest("Missing the file: send it in a multipart field named 'file'.", "file", "missing_file");
      return await files.completeUpload(upload, { filename, purpose });
    } finally {
      await upload.release();
    }
  });

  app.get<{ Querystring: Static<typeof ListQuery> }>("/v1/files", { schema: { querystring: ListQuery } }, async (request) =>
    files.list(request.ctx.principal!.accountId, {
      limit: parseLimit(request.query.limit),
      order: request.query.order ?? "desc",
      after: request.query.after,
      purpose: request.query.purpose,
    }),
  );

  app.get<{ Params: { file_id: string } }>("/v1/files/:file_id", async (request) => files.get(request.ctx.principal!.accountId, request.params.file_id));

  app.delete<{ Params: { file_id: string } }>("/v1/files/:file_id", async (request) => files.delete(request.ctx.principal!.accountId, request.params.file_id));
}
