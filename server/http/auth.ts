// Reading the API key from the header each surface uses.
import type { FastifyRequest } from "fastify";

export function bearerKey(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== "string") return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** Messages surface: x-api-key, and Authorization: Bearer (what @anthropic-ai/sdk 1.x sends). */
export function anthropicKey(request: FastifyRequest): string | undefined {
  const header = request.headers["x-api-key"];
  if (typeof header === "string" && header.trim() !== "") return header.trim();
  return bearerKey(request);
}
