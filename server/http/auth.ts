// The keyed scope's one onRequest hook: read the key from the header the request's surface uses, check
// it, and read X-Timezone. It runs before body parsing and validation, so a bad key is a 401 whatever the
// body says, and a bad zone a 400 before the body is looked at.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { invalidRequest } from "../core/errors.js";
import type { HttpDeps } from "./context.js";

export function bearerKey(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== "string") return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** x-api-key, else Authorization: Bearer (what @anthropic-ai/sdk 1.x sends). */
export function anthropicKey(request: FastifyRequest): string | undefined {
  const header = request.headers["x-api-key"];
  if (typeof header === "string" && header.trim() !== "") return header.trim();
  return bearerKey(request);
}

/**
 * Chat Completions and Responses read Authorization: Bearer, as the spec's table says. Every other key
 * endpoint (Messages and its batches, files, audit, agent) takes either header: the Anthropic SDK sends
 * x-api-key to /v1/files too.
 */
export function presentedKey(request: FastifyRequest): string | undefined {
  const area = request.ctx.area;
  return area === "chat" || area === "responses" ? bearerKey(request) : anthropicKey(request);
}

export const DEFAULT_TIMEZONE = "UTC";

/** The IANA zone named by X-Timezone, in its canonical spelling; 400 naming the header when unknown. */
export function parseTimezone(header: string | string[] | undefined): string {
  if (header === undefined) return DEFAULT_TIMEZONE;
  const value = (Array.isArray(header) ? header[0] : header)?.trim() ?? "";
  if (value === "") return DEFAULT_TIMEZONE;
  try {
    return new Intl.DateTimeFormat("en-US", { timeZone: value }).resolvedOptions().timeZone;
  } catch {
    throw invalidRequest(
      `The X-Timezone header must be an IANA time zone name such as 'Europe/Berlin' or 'UTC' (got '${value}').`,
      "X-Timezone",
      "invalid_timezone",
    );
  }
}

/** Whether the request carries a valid key (for keyless endpoints that say more to key holders). */
export function keyIsValid(request: FastifyRequest, deps: HttpDeps): boolean {
  const key = presentedKey(request);
  if (key === undefined) return false;
  try {
    deps.keys.authenticate(key);
    return true;
  } catch {
    return false;
  }
}

/** Adds the key check to every route of `scope` (the key endpoints). */
export function requireKey(scope: FastifyInstance, deps: HttpDeps): void {
  scope.addHook("onRequest", async (request) => {
    request.ctx.principal = deps.keys.authenticate(presentedKey(request));
    request.ctx.timezone = parseTimezone(request.headers["x-timezone"]);
  });
}
