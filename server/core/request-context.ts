// What the server knows about each request as it runs, and who is told when it ends. It lives in core so
// that every layer may read it; it names no feature. A feature that wants more facts on the record adds
// them by declaration merging on RequestContext (the audit feature declares batchId, runId and run in
// server/features/audit/audit-service.ts), so the lower layers never learn their names.
import type { Mode, StopReason, Usage } from "./inference.js";

/** Which part of the API a path belongs to; it picks the key header, the error format and the audit label. */
export type ApiArea = "chat" | "responses" | "messages" | "batches" | "files" | "audit" | "agent" | "models" | "health" | "console" | "other";

/** The scheduler's classes of work: interactive (HTTP surfaces, the window), agent steps, batch items. */
export type WorkClass = "interactive" | "agent" | "batch";

/** Who called: the key that authenticated the request and its account. */
export interface Principal {
  keyId: string;
  accountId: string;
  reasoningTrace: boolean;
}

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
