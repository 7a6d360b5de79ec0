// Numbered migrations, applied in order, each once, each in its own transaction. Each is a numbered
// module exporting its SQL (rather than a .sql file) so the compiled server needs no asset copying.
import { sql as m0001 } from "./0001-initial.js";
import { sql as m0002 } from "./0002-models.js";
import { sql as m0003 } from "./0003-accounts-audit.js";
import { sql as m0005 } from "./0005-batches.js";
import { sql as m0004 } from "./0004-files.js";
import { sql as m0006 } from "./0006-agent-runs.js";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: Migration[] = [
  { version: 1, name: "initial", sql: m0001 },
  { version: 2, name: "models", sql: m0002 },
  { version: 3, name: "accounts-audit", sql: m0003 },
  { version: 5, name: "batches", sql: m0005 },
  { version: 4, name: "files", sql: m0004 },
  { version: 6, name: "agent-runs", sql: m0006 },
];
