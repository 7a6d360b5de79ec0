// The rate headers on key endpoints: X-RateLimit-Limit is the account's concurrent-request limit,
// X-RateLimit-Remaining what it has left now, X-RateLimit-Reset the seconds until it is expected to have
// room again (0 while it has room). Streams get them before their first byte (see inference.ts); other
// responses as they are sent.
import type { FastifyInstance, FastifyReply } from "fastify";
import type { Scheduler } from "../pipeline/scheduler.js";

export function setRateHeaders(reply: FastifyReply, scheduler: Scheduler, accountId: string): void {
  const usage = scheduler.usage(accountId);
  reply.header("x-ratelimit-limit", String(usage.limit));
  reply.header("x-ratelimit-remaining", String(usage.remaining));
  reply.header("x-ratelimit-reset", String(usage.resetSeconds));
}

export function rateHeaders(scope: FastifyInstance, scheduler: Scheduler): void {
  scope.addHook("onSend", async (request, reply, payload) => {
    const principal = request.ctx.principal;
    if (principal) setRateHeaders(reply, scheduler, principal.accountId);
    return payload;
  });
}
