// One server per data dir. Two servers on one database would both follow and switch models, both expire
// files and run batches, and fight over the port the desktop window expects. The lock is SQLite's own
// exclusive lock on a small database file (server.lock), held for the server's lifetime: the operating
// system drops it when the process ends, however it ends, so a crash or SIGKILL leaves no stale lock and
// no PID to second-guess. Beside it, server.json names the holder (pid, URL, start time) for the message
// the next server prints. `svc keys` and `svc models` never take the lock: they work beside a server.
import Database from "better-sqlite3";
import { chmodSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { prepareDataDir, preparePrivateFile, PRIVATE_FILE_MODE } from "./file-modes.js";

export const LOCK_FILE = "server.lock";
export const HOLDER_FILE = "server.json";

export interface LockHolder {
  pid: number;
  /** Set once the server listens. */
  url?: string;
  /** Epoch ms. */
  startedAt: number;
}

export class DataDirLockedError extends Error {
  override name = "DataDirLockedError";
  constructor(
    readonly dataDir: string,
    readonly holder: LockHolder | null,
  ) {
    const who = holder
      ? `Another svc server (pid ${holder.pid}${holder.url ? `, ${holder.url}` : ""}, started ${new Date(holder.startedAt).toISOString()})`
      : "Another svc server";
    super(
      `${who} is using the data dir ${dataDir}. Stop it first, or give this server its own --data-dir (SVC_DATA_DIR). ` +
        "`svc keys` and `svc models` commands work beside a running server.",
    );
  }
}

function readHolder(dataDir: string): LockHolder | null {
  try {
    const value = JSON.parse(readFileSync(join(dataDir, HOLDER_FILE), "utf8")) as LockHolder;
    return typeof value.pid === "number" ? value : null;
  } catch {
    return null;
  }
}

export class DataDirLock {
  private constructor(
    private readonly dataDir: string,
    private readonly db: Database.Database,
    private holder: LockHolder,
  ) {}

  /** Takes the data dir's lock, or throws DataDirLockedError naming the server that holds it. */
  static acquire(dataDir: string, options: { nativeBinding?: string } = {}): DataDirLock {
    const path = join(dataDir, LOCK_FILE);
    prepareDataDir(dataDir);
    preparePrivateFile(path);
    const db = new Database(path, { timeout: 0, ...(options.nativeBinding ? { nativeBinding: options.nativeBinding } : {}) });
    try {
      // In exclusive locking mode the lock taken by the first write is kept until the connection closes.
      db.pragma("locking_mode = EXCLUSIVE");
      db.exec("BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held (pid INTEGER); DELETE FROM held; INSERT INTO held VALUES (" + process.pid + "); COMMIT;");
    } catch (err) {
      db.close();
      if ((err as { code?: string }).code === "SQLITE_BUSY") throw new DataDirLockedError(dataDir, readHolder(dataDir));
      throw err;
    }
    const lock = new DataDirLock(dataDir, db, { pid: process.pid, startedAt: Date.now() });
    lock.write();
    return lock;
  }

  /** Records the URL the server listens on, for the next server's message. */
  listening(url: string): void {
    this.holder = { ...this.holder, url };
    this.write();
  }

  release(): void {
    if (!this.db.open) return;
    if (readHolder(this.dataDir)?.pid === process.pid) rmSync(join(this.dataDir, HOLDER_FILE), { force: true });
    this.db.close();
  }

  private write(): void {
    const path = join(this.dataDir, HOLDER_FILE);
    writeFileSync(path, JSON.stringify(this.holder), { mode: PRIVATE_FILE_MODE });
    chmodSync(path, PRIVATE_FILE_MODE);
  }
}
