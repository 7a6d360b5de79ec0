// Fastify's own errors (body parsing, size, schema validation) as AppErrors, so each surface can answer
// them in its own format.
import type { FastifyError } from "fastify";
import { AppError, toAppError, tooManyItems } from "../core/errors.js";

interface AjvError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** "/messages/0/role" → "messages[0].role" */
export function paramOfPath(path: string, extra?: string): string {
  const parts = path.split("/").filter(Boolean).map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (extra) parts.push(extra);
  let out = "";
  for (const part of parts) out += /^\d+$/.test(part) ? `[${part}]` : out ? `.${part}` : part;
  return out;
}

function describeValidation(error: AjvError): { param: string | undefined; message: string } {
  const params = error.params ?? {};
  if (error.keyword === "required") {
    const param = paramOfPath(error.instancePath ?? "", String(params.missingProperty));
    return { param, message: `Missing required parameter: '${param}'.` };
  }
  if (error.keyword === "additionalProperties") {
    const param = paramOfPath(error.instancePath ?? "", String(params.additionalProperty));
    return { param, message: `Unrecognized parameter: '${param}'.` };
  }
  const param = paramOfPath(error.instancePath ?? "") || undefined;
  let detail = error.message ?? "is invalid";
  if (error.keyword === "anyOf" || error.keyword === "oneOf") detail = "has the wrong type or shape";
  else if (error.keyword === "enum" && Array.isArray(params.allowedValues))
    detail = `must be one of ${params.allowedValues.map((v) => JSON.stringify(v)).join(", ")}`;
  else if (error.keyword === "type") detail = `must be of type ${String(params.type).replace(",", " or ")}`;
  return { param, message: param ? `Invalid value for '${param}': ${detail}.` : `Invalid request body: ${detail}.` };
}

export function fastifyErrorToAppError(err: FastifyError | Error): AppError {
  if (err instanceof AppError) return err;
  const fe = err as FastifyError & { validation?: AjvError[] };
  // A list over its bound, whichever branch of a union (a string or a list) reported first.
  const tooLong = fe.validation?.find((e) => e.keyword === "maxItems");
  if (tooLong) return tooManyItems(paramOfPath(tooLong.instancePath ?? ""), Number(tooLong.params?.limit));
  if (fe.validation && fe.validation.length > 0) {
    const { param, message } = describeValidation(fe.validation[0]!);
    return new AppError("invalid_request", message, { param, code: "invalid_request" });
  }
  switch (fe.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new AppError("invalid_request", "We could not parse the JSON body of your request. Send valid JSON.", { code: "invalid_json" });
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new AppError("payload_too_large", "The request body is larger than the 50 MB limit.", { code: "request_too_large" });
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new AppError("invalid_request", "Unsupported Content-Type; send application/json.", { code: "unsupported_media_type" });
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new AppError("invalid_request", "The Content-Length header does not match the body.", { code: "invalid_content_length" });
  }
  if (typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500)
    return new AppError("invalid_request", fe.message, { code: "invalid_request" });
  return toAppError(err);
}
