// POST /v1/agent/run and POST /v1/agent/run/{run_id}/cancel (OpenAI error format).
//
// Everything that can refuse a run (the body, the files, no model, the per-account limit) is checked
// before the response starts. From then on the run exists: its id goes out at once (the first stream event,
// or the X-Run-Id header of a non-streaming response, whose body follows when the run ends), and whatever
// happens to it is in the run object (status failed with its error, not an HTTP error).
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../../core/errors.js";
import type { Usage } from "../../core/inference.js";
import type { ServerDeps } from "../server-deps.js";
import { setRateHeaders } from "../../http/limits.js";
import { KEEPALIVE_MS, SseResponse } from "../../http/sse.js";
import { AgentRun, type RunEvent, type RunUsage } from "./agent-run.js";
import { CalculatorPool } from "./calculator-pool.js";
import { RunRegistry } from "./run-registry.js";
import { AgentRunSchema, decodeAgentRunRequest, type AgentRunBody } from "./run-request.js";
import { ToolBox } from "./tools.js";

/** How long cancel waits for the run to stop before answering with the run as it is. */
const CANCEL_WAIT_MS = 5000;

/** Responses-style SSE: `event:` line, data with type and sequence_number; no [DONE]. */
export class RunStreamEncoder {
  private sequence = 0;

  push(event: RunEvent): string {
    const data = { ...event, sequence_number: this.sequence++ };
    return `event: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`;
  }
}

function headersOf(reply: FastifyReply): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) out[name] = String(value);
  return out;
}

function canonicalUsage(usage: RunUsage): Usage {
  return {
    promptTokens: usage.input_tokens,
    cachedTokens: usage.input_tokens_details.cached_tokens,
    cacheWriteTokens: 0,
    completionTokens: usage.output_tokens,
    reasoningTokens: usage.output_tokens_details.reasoning_tokens,
  };
}

export async function registerAgentRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  const registry = new RunRegistry({ runsPerAccount: deps.agent?.runsPerAccount });
  const calculator = new CalculatorPool(deps.agent?.calculator);
  app.addHook("onClose", async () => calculator.close());

  app.addHook("preClose", async () => {
    const runs = registry.stopAll();
    await Promise.race([Promise.all(runs.map((r) => r.run())), new Promise((resolve) => setTimeout(resolve, CANCEL_WAIT_MS).unref())]);
  });

  app.post<{ Body: AgentRunBody }>("/v1/agent/run", { schema: { body: AgentRunSchema } }, async (request, reply) => {
    const ctx = request.ctx;
    const principal = ctx.principal;
    if (!principal) throw new AppError("internal", "An agent route ran without authentication.");
    const accountId = principal.accountId;
    ctx.workClass = "agent";
    ctx.inference.model = request.body.model ?? undefined;
    const decoded = decodeAgentRunRequest(request.body);
    decoded.fileIds?.forEach((id, i) => {
      try {
        deps.files.get(accountId, id);
      } catch (err) {
        if (err instanceof AppError && err.kind === "not_found")
          throw new AppError("not_found", `No such file: '${id}'.`, { code: "file_not_found", param: `file_ids[${i}]` });
        throw err;
      }
    });
    // No model: a 503 now rather than a run that fails at once.
    deps.engineHost.engine();
    registry.admit(accountId);

    const tools = new ToolBox({ files: deps.files, accountId, fileIds: decoded.fileIds, timezone: ctx.timezone, calculator });
    // The calculator's process loads math.js (a second or two) while the model takes its first step.
    if (decoded.builtins.includes("calculator")) calculator.warmUp();
    const encoder = decoded.stream ? new RunStreamEncoder() : null;
    let sse: SseResponse | null = null;
    const run: AgentRun = new AgentRun({
      request: decoded,
      accountId,
      pipeline: deps.pipeline,
      tools,
      timezone: ctx.timezone,
      reasoningTrace: principal.reasoningTrace,
      emit: async (event) => {
        if (sse && encoder) await sse.write(encoder.push(event));
      },
    });
    registry.add(run);
    ctx.runId = run.id;
    ctx.inference.mode = decoded.base.reasoning.mode;
    const noteOutcome = () => {
      ctx.run = { status: run.ended ? run.status : "cancelled", steps: run.stepCount };
      ctx.inference.usage = canonicalUsage(run.usage);
    };
    // Before the request-context listener (the audit): a client that leaves cancels its run, and the
    // record says so.
    reply.raw.prependListener("close", () => {
      if (!run.ended) run.stop("disconnected");
      noteOutcome();
    });
    reply.header("x-run-id", run.id);
    setRateHeaders(reply, deps.pipeline.scheduler, accountId);

    if (encoder) {
      sse = new SseResponse(reply, () => headersOf(reply), deps.sseKeepAliveMs);
      try {
        await run.run();
      } finally {
        registry.remove(run);
        noteOutcome();
        sse.end();
      }
      return reply;
    }

    // Non-streaming: the headers (with X-Run-Id) now, so a client can cancel; the body when the run ends.
    // JSON allows whitespace before a value: a space now and then keeps idle timeouts from cutting a long run.
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { "content-type": "application/json; charset=utf-8", "cache-control": "no-cache", ...headersOf(reply) });
    raw.flushHeaders();
    const keepalive = setInterval(() => {
      if (!raw.destroyed && !raw.writableEnded) raw.write(" ");
    }, deps.sseKeepAliveMs ?? KEEPALIVE_MS);
    keepalive.unref();
    try {
      await run.run();
    } finally {
      clearInterval(keepalive);
      registry.remove(run);
      noteOutcome();
    }
    if (!raw.destroyed && !raw.writableEnded) raw.end(JSON.stringify(run.toObject()));
    return reply;
  });

  app.post<{ Params: { run_id: string } }>("/v1/agent/run/:run_id/cancel", async (request: FastifyRequest<{ Params: { run_id: string } }>) => {
    const principal = request.ctx.principal;
    if (!principal) throw new AppError("internal", "An agent route ran without authentication.");
    const run = registry.find(principal.accountId, request.params.run_id);
    request.ctx.runId = run.id;
    run.stop("cancelled");
    await Promise.race([run.run(), new Promise((resolve) => setTimeout(resolve, CANCEL_WAIT_MS).unref())]);
    return run.toObject();
  });
}
