// What routes need from the rest of the server, and what the server knows about each request as it runs.
import type { Mode, StopReason, Usage } from "../core/inference.js";
import type { EngineHost } from "../engine/engine-host.js";
import type { AccountsService } from "../features/accounts/accounts-service.js";
import type { AuditService } from "../features/audit/audit-service.js";
import type { BatchService } from "../features/batches/batch-service.js";
import type { CalculatorBudget } from "../features/agent/calculator-pool.js";
import type { FilesService } from "../features/files/files-service.js";
import type { KeysService, Principal } from "../features/keys/keys-service.js";
import type { InferencePipeline } from "../pipeline/pipeline.js";
import type { WorkClass } from "../pipeline/scheduler.js";

/** Which part of the API a path belongs to; it picks the key header, the error format and the audit label. */
export type ApiArea = "chat" | "responses" | "messages" | "batches" | "files" | "audit" | "agent" | "models" | "health" | "console" | "other";

/** What an inference did, filled in as it runs (for the audit record; never any content). */
export interface InferenceFacts {
  /** The model name the client sent. */
  model?: string;
  mode?: Mode;
  sessionId?: string;
  /** Time waiting for a sequence, ms. */
  queuedMs?: number;
  /** From the request's arrival to the first generated token, ms. */
  ttftMs?: number;
  usage?: Usage;
  stopReason?: StopReason;
}

export interface RequestContext {
  /** Also sent as X-Request-Id. */
  id: string;
  /** Epoch ms when the request arrived. */
  receivedAt: number;
  /** performance.now() when the request arrived, for durations. */
  startedAt: number;
  method: string;
  /** The path without the query string. */
  path: string;
  /** The matched route with its parameters as :name (undefined for a 404): what the audit records as the path. */
  route?: string;
  area: ApiArea;
  /** Set by the auth hook on key endpoints. */
  principal: Principal | null;
  /** IANA zone from X-Timezone (default UTC): usage windows and per-day statistics use it. */
  timezone: string;
  workClass: WorkClass;
  inference: InferenceFacts;
  /** The error code the response carried, if it was an error. */
  errorCode?: string;
  /** Set when a batch or agent run is involved. */
  batchId?: string;
  runId?: string;
  /** An agent run's outcome (its status and number of steps), for the audit record. */
  run?: { status: string; steps: number };
}

/** How a request ended, for observers (the audit record). */
export interface RequestOutcome {
  statusCode: number;
  durationMs: number;
  /** The client left before the response was complete. */
  aborted: boolean;
}

/** Called once per request after its response ended; must not throw (failures are logged and ignored). */
export type RequestObserver = (ctx: RequestContext, outcome: RequestOutcome) => void;

export interface ServerDeps {
  pipeline: InferencePipeline;
  keys: KeysService;
  /** Accounts and the account holders' console (/v1/console). */
  accounts: AccountsService;
  /** The audit endpoints read it; its observer (in `observers`) writes it. */
  audit: AuditService;
  engineHost: EngineHost;
  files: FilesService;
  version: string;
  /** Message batches (/v1/messages/batches); without it those paths are 404. */
  batches?: BatchService;
  /** Agent runs (/v1/agent/run): limits, and the calculator's budget; defaults in server/features/agent. */
  agent?: { runsPerAccount?: number; calculator?: Partial<CalculatorBudget> };
  /** Sees every finished request: the audit feature records key requests here. */
  observers?: RequestObserver[];
  /** How long a stream may wait (queue, prompt) before its first keep-alive comment; default KEEPALIVE_MS. */
  sseKeepAliveMs?: number;
  /** A stream whose client reads nothing for this long is closed, freeing its sequence; default WRITE_TIMEOUT_MS. */
  streamWriteTimeoutMs?: number;
  /** The server's log; every 5xx is written here with its request id. */
  log?: (level: "debug" | "info" | "warn" | "error", message: string) => void;
}

declare module "fastify" {
  interface FastifyRequest {
    ctx: RequestContext;
  }
}
