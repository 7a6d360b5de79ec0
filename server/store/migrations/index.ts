// Numbered migrations, applied in order, each once, each in its own transaction. Each is a numbered
// module exporting its SQL (rather than a .sql file) so the compiled server needs no asset copying.
import { sql as m0001 } from "./0001-initial.js";
import { sql as m0002 } from "./0002-models.js";
import { sql as m0004 } from "./0004-files.js";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: Migration[] = [
  { version: 1, name: "initial", sql: m0001 },
  { version: 2, name: "models", sql: m0002 },
  { version: 4, name: "files", sql: m0004 },
];
