// What the connection layer (deadlines answered on the socket, outside Fastify) and the request layer (the
// request context and its observers) tell each other about one response: its request's id, so a 408 carries
// it, and that it was answered that way, so the audit records what the client got rather than Node's
// default status of a response never sent.
import type { ServerResponse } from "node:http";

/** nginx's "client closed request": the client left before any status was sent. */
export const CLIENT_CLOSED_REQUEST = 499;

const requestIds = new WeakMap<ServerResponse, string>();
const rawAnswers = new WeakMap<ServerResponse, { status: number; code: string }>();

export function noteRequestId(res: ServerResponse, id: string): void {
  requestIds.set(res, id);
}

export function requestIdOf(res: ServerResponse): string | undefined {
  return requestIds.get(res);
}

/** Records that `res`'s connection was answered with `status` (and closed) on the socket itself. */
export function noteRawAnswer(res: ServerResponse, status: number, code: string): void {
  res.statusCode = status;
  rawAnswers.set(res, { status, code });
}

export function rawAnswerOf(res: ServerResponse): { status: number; code: string } | undefined {
  return rawAnswers.get(res);
}
