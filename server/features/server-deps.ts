// What the routes of the features need: the HTTP layer's dependencies plus each feature's service. The
// composition root (server/index.ts) builds one and hands it to server/app.ts.
import type { HttpDeps } from "../http/context.js";
import type { AccountsService } from "./accounts/accounts-service.js";
import type { CalculatorBudget } from "./agent/calculator-pool.js";
import type { AuditService } from "./audit/audit-service.js";
import type { BatchService } from "./batches/batch-service.js";
import type { FilesService } from "./files/files-service.js";
import type { KeysService } from "./keys/keys-service.js";

export interface ServerDeps extends HttpDeps {
  keys: KeysService;
  /** Accounts and the account holders' console (/v1/console). */
  accounts: AccountsService;
  /** The audit endpoints read it; its observer (in `observers`) writes it. */
  audit: AuditService;
  files: FilesService;
  /** Message batches (/v1/messages/batches); without it those paths are 404. */
  batches?: BatchService;
  /** Agent runs (/v1/agent/run): limits, and the calculator's budget; defaults in server/features/agent. */
  agent?: { runsPerAccount?: number; calculator?: Partial<CalculatorBudget> };
}
