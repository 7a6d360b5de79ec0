// The one SQLite database file in the data dir (WAL mode), with numbered migrations.
import Database from "better-sqlite3";
import { join } from "node:path";
import { prepareDataDir, preparePrivateFile, restrictFile } from "./file-modes.js";
import { MIGRATIONS, type Migration } from "./migrations/index.js";

export type Db = Database.Database;

export const DATABASE_FILE = "svc.sqlite3";

export interface DatabaseOptions {
  /**
   * The better_sqlite3.node to load instead of the one in node_modules: under Electron in development, one
   * built for Electron's ABI (the one in node_modules is built for Node's).
   */
  nativeBinding?: string;
}

export function openDatabase(dataDir: string, migrations: Migration[] = MIGRATIONS, options: DatabaseOptions = {}): Db {
  const path = join(dataDir, DATABASE_FILE);
  prepareDataDir(dataDir);
  preparePrivateFile(path);
  for (const suffix of ["-wal", "-shm", "-journal"]) restrictFile(path + suffix);
  const db = new Database(path, options.nativeBinding ? { nativeBinding: options.nativeBinding } : {});
  db.pragma("journal_mode = WAL");
  db.pragma("foreign_keys = ON");
  // Another process (a CLI command beside a running server) may hold the write lock briefly.
  db.pragma("busy_timeout = 5000");
  db.pragma("synchronous = NORMAL");
  // Deleted rows are overwritten with zeros, not just unlinked: an erased audit record or a deleted batch's
  // requests and results leave no readable bytes in the file. See AuditRepository.scrub for the write-ahead log.
  db.pragma("secure_delete = ON");
  migrate(db, migrations);
  return db;
}

export function migrate(db: Db, migrations: Migration[] = MIGRATIONS): void {
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)");
  const applied = new Set(
    (db.prepare("SELECT version FROM schema_migrations").all() as Array<{ version: number }>).map((r) => r.version),
  );
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      // Re-check inside the write transaction: another process may have migrated meanwhile.
      if (db.prepare("SELECT 1 FROM schema_migrations WHERE version = ?").get(m.version)) return;
      db.exec(m.sql);
      db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, Date.now());
    }).immediate();
  }
}
