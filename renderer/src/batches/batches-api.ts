// The Message Batches API as the window calls it (the list itself comes pushed): create, cancel, delete, and
// the results, read as lines.
import type { BatchResultLine, MessageBatch } from "../../../server/features/console/wire";
import { apiErrorOf, ApiError, apiJson, withWindowKey } from "../api/http";

export interface LineProblem {
  index: number;
  param: string;
  message: string;
}

/** A create refused for bad requests: the server lists them by index. */
export class InvalidRequestsError extends Error {
  constructor(
    message: string,
    readonly problems: LineProblem[],
  ) {
    super(message);
  }
}

export async function createBatch(baseUrl: string, requests: unknown[]): Promise<MessageBatch> {
  return withWindowKey(async (key) => {
    const res = await fetch(`${baseUrl}/v1/messages/batches`, {
      method: "POST",
      // One key per creation: should the answer be lost, sending again cannot make a second batch.
      headers: { "x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json", "idempotency-key": crypto.randomUUID() },
      body: JSON.stringify({ requests }),
    });
    const text = await res.text();
    if (res.ok) return JSON.parse(text) as MessageBatch;
    const listed = (JSON.parse(text || "{}") as { error?: { details?: { errors?: LineProblem[] } } }).error?.details?.errors ?? [];
    const error = apiErrorOf(res.status, text);
    throw listed.length > 0 ? new InvalidRequestsError(error.message, listed) : error;
  });
}

export function cancelBatch(baseUrl: string, id: string): Promise<MessageBatch> {
  return apiJson(`${baseUrl}/v1/messages/batches/${encodeURIComponent(id)}/cancel`, { method: "POST" });
}

export function deleteBatch(baseUrl: string, id: string): Promise<unknown> {
  return apiJson(`${baseUrl}/v1/messages/batches/${encodeURIComponent(id)}`, { method: "DELETE" });
}

/** The results file as the server streams it (JSONL). */
export async function fetchResults(resultsUrl: string): Promise<string> {
  return withWindowKey(async (key) => {
    const res = await fetch(resultsUrl, { headers: { "x-api-key": key, "anthropic-version": "2023-06-01" } });
    const text = await res.text();
    if (!res.ok) throw apiErrorOf(res.status, text);
    return text;
  });
}

export function parseResults(text: string): BatchResultLine[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as BatchResultLine);
}

/** What a result says, as text: the answer, or why there is none. */
export function resultText(line: BatchResultLine): string {
  const r = line.result;
  if (r.type === "succeeded")
    return r.message.content
      .map((block) => (block.type === "text" ? (block.text ?? "") : block.type === "tool_use" ? `[${block.name}] ${JSON.stringify(block.input)}` : ""))
      .filter(Boolean)
      .join("\n");
  if (r.type === "errored") return r.error.error.message;
  return r.type === "canceled" ? "Canceled before it ran." : "Expired before it ran.";
}

export { ApiError };
