// The message batch object as the Messages API shows it (and @anthropic-ai/sdk types it), and the limits.
import type { BatchRow } from "../../store/batches-repository.js";

export interface BatchLimits {
  maxRequests: number;
  maxBytes: number;
  inFlightPerAccount: number;
  processingWindowMs: number;
  resultsRetentionMs: number;
}

export const BATCH_LIMITS: Readonly<BatchLimits> = {
  /** Spec: a batch holds at most 100,000 requests or 256 MiB. */
  maxRequests: 100_000,
  maxBytes: 256 * 1024 * 1024,
  /** Spec: 50 batches in flight per user (account). */
  inFlightPerAccount: 50,
  /** As the Messages API: a batch that has not finished 24 hours after creation ends; what has not run expires. */
  processingWindowMs: 24 * 60 * 60 * 1000,
  /** Spec: results remain available 29 days (counted from the end of processing). */
  resultsRetentionMs: 29 * 24 * 60 * 60 * 1000,
};

export const BATCH_ID_PREFIX = "msgbatch_";

export interface MessageBatchObject {
  id: string;
  type: "message_batch";
  processing_status: "in_progress" | "canceling" | "ended";
  request_counts: { processing: number; succeeded: number; errored: number; canceled: number; expired: number };
  created_at: string;
  ended_at: string | null;
  expires_at: string;
  cancel_initiated_at: string | null;
  archived_at: string | null;
  results_url: string | null;
}

const rfc3339 = (ms: number): string => new Date(ms).toISOString();
const rfc3339OrNull = (ms: number | null): string | null => (ms === null ? null : rfc3339(ms));

/** `baseUrl`: this server as the client reached it (http://127.0.0.1:8787), for the absolute results_url. */
export function encodeBatch(row: BatchRow, baseUrl: string): MessageBatchObject {
  const finished = row.succeeded + row.errored + row.canceled + row.expired;
  const ended = row.status === "ended";
  return {
    id: row.id,
    type: "message_batch",
    // An upload under way is never shown; should one be, it is not yet anything but in progress.
    processing_status: row.status === "uploading" ? "in_progress" : row.status,
    request_counts: {
      processing: Math.max(0, row.request_count - finished),
      succeeded: row.succeeded,
      errored: row.errored,
      canceled: row.canceled,
      expired: row.expired,
    },
    created_at: rfc3339(row.created_at),
    ended_at: rfc3339OrNull(row.ended_at),
    expires_at: rfc3339(row.expires_at),
    cancel_initiated_at: rfc3339OrNull(row.cancel_initiated_at),
    archived_at: rfc3339OrNull(row.archived_at),
    results_url: ended && row.archived_at === null ? `${baseUrl}/v1/messages/batches/${row.id}/results` : null,
  };
}
