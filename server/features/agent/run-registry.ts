// The runs alive now (for cancel and the per-account limit) and, for a while, the ids of those that ended
// (metadata only: who and how it ended), so that cancelling a finished run says so instead of "not found".
import { AppError } from "../../core/errors.js";
import type { AgentRun, RunStatus } from "./agent-run.js";

export const DEFAULT_RUNS_PER_ACCOUNT = 2;
const ENDED_KEPT = 10_000;
const ENDED_KEPT_MS = 24 * 3600 * 1000;

export interface RunRegistryOptions {
  /** Runs one account may have alive at once; beyond it, 429. */
  runsPerAccount?: number;
  now?: () => number;
}

export class RunRegistry {
  readonly runsPerAccount: number;
  private readonly live = new Map<string, AgentRun>();
  private readonly ended = new Map<string, { accountId: string; status: RunStatus; at: number }>();
  private readonly now: () => number;

  constructor(options: RunRegistryOptions = {}) {
    this.runsPerAccount = options.runsPerAccount ?? DEFAULT_RUNS_PER_ACCOUNT;
    this.now = options.now ?? Date.now;
  }

  /** Throws the 429 when the account already has as many runs as it may. */
  admit(accountId: string): void {
    const own = [...this.live.values()].filter((r) => r.accountId === accountId);
    if (own.length < this.runsPerAccount) return;
    // Every run ends by its deadline at the latest, so the soonest one is an honest upper bound.
    const soonest = Math.min(...own.map((r) => r.deadline));
    const retryAfter = Math.max(1, Math.ceil((soonest - Date.now()) / 1000));
    throw new AppError(
      "rate_limit",
      `Too many agent runs in progress: at most ${this.runsPerAccount} per account at once. Wait for one to end or cancel one (POST /v1/agent/run/{run_id}/cancel).`,
      { code: "too_many_agent_runs", retryAfter },
    );
  }

  add(run: AgentRun): void {
    this.live.set(run.id, run);
  }

  /** The run has ended (its response is complete, or its client left). */
  remove(run: AgentRun): void {
    if (this.live.get(run.id) !== run) return;
    this.live.delete(run.id);
    this.ended.set(run.id, { accountId: run.accountId, status: run.status, at: this.now() });
    this.prune();
  }

  /** The caller's live run; another account's run is as unknown as one that never existed. */
  find(accountId: string, runId: string): AgentRun {
    const run = this.live.get(runId);
    if (run && run.accountId === accountId && !run.ended) return run;
    const ended = run && run.accountId === accountId ? { status: run.status } : this.ended.get(runId);
    if (ended && (run || this.ended.get(runId)?.accountId === accountId))
      throw new AppError("conflict", `The run '${runId}' has already ended (status ${ended.status}); only a queued or in-progress run can be cancelled.`, {
        code: "run_not_active",
        param: "run_id",
      });
    throw new AppError("not_found", `No agent run with id '${runId}'.`, { code: "run_not_found", param: "run_id" });
  }

  /** Live runs of one account (for tests and the health view). */
  count(accountId?: string): number {
    return accountId === undefined ? this.live.size : [...this.live.values()].filter((r) => r.accountId === accountId).length;
  }

  stopAll(): AgentRun[] {
    const runs = [...this.live.values()];
    for (const run of runs) run.stop("shutdown");
    return runs;
  }

  private prune(): void {
    const cutoff = this.now() - ENDED_KEPT_MS;
    for (const [id, entry] of this.ended) {
      if (this.ended.size <= ENDED_KEPT && entry.at >= cutoff) break;
      this.ended.delete(id);
    }
  }
}
