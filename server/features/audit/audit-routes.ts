// GET /v1/audit, GET /v1/audit/stats, GET /v1/audit/{request_id}, DELETE /v1/audit/{request_id}: the
// caller's own account's records (the key says which account). Bodies: docs/api.md, "Audit".
import type { FastifyInstance, FastifyRequest } from "fastify";
import { AppError } from "../../core/errors.js";
import type { ServerDeps } from "../server-deps.js";
import { parseAuditFilter, parseAuditListQuery } from "./audit-query.js";

function accountOf(request: FastifyRequest): string {
  const principal = request.ctx.principal;
  if (!principal) throw new AppError("internal", "An audit route ran without authentication.");
  return principal.accountId;
}

const query = (request: FastifyRequest) => (request.query ?? {}) as Record<string, unknown>;

export async function registerAuditRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get("/v1/audit", async (request) => deps.audit.list(parseAuditListQuery(query(request), accountOf(request), request.ctx.timezone)));

  app.get("/v1/audit/stats", async (request) =>
    deps.audit.stats(parseAuditFilter(query(request), accountOf(request), request.ctx.timezone), request.ctx.timezone),
  );

  app.get<{ Params: { request_id: string } }>("/v1/audit/:request_id", async (request) => deps.audit.get(accountOf(request), request.params.request_id));

  app.delete<{ Params: { request_id: string } }>("/v1/audit/:request_id", async (request) =>
    deps.audit.erase(accountOf(request), request.params.request_id),
  );
}
