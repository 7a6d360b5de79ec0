import type { Db } from "./database.js";

export interface ConsoleSessionRow {
  token_hash: string;
  account_id: string;
  csrf_token: string;
  created_at: number;
  last_seen_at: number;
  expires_at: number;
}

/** The account holders' console sessions (cookie values are stored as their SHA-256 only). */
export class ConsoleSessionRepository {
  constructor(private readonly db: Db) {}

  insert(row: ConsoleSessionRow): void {
    this.db
      .prepare(
        `INSERT INTO console_sessions (token_hash, account_id, csrf_token, created_at, last_seen_at, expires_at)
         VALUES (@token_hash, @account_id, @csrf_token, @created_at, @last_seen_at, @expires_at)`,
      )
      .run(row);
  }

  find(tokenHash: string): ConsoleSessionRow | undefined {
    return this.db.prepare("SELECT * FROM console_sessions WHERE token_hash = ?").get(tokenHash) as ConsoleSessionRow | undefined;
  }

  touch(tokenHash: string, at: number): void {
    this.db.prepare("UPDATE console_sessions SET last_seen_at = ? WHERE token_hash = ?").run(at, tokenHash);
  }

  delete(tokenHash: string): void {
    this.db.prepare("DELETE FROM console_sessions WHERE token_hash = ?").run(tokenHash);
  }

  /** Ends every session of an account (disabled, password reset or changed), optionally but one. */
  deleteForAccount(accountId: string, except?: string): number {
    return this.db.prepare("DELETE FROM console_sessions WHERE account_id = ? AND token_hash IS NOT ?").run(accountId, except ?? null).changes;
  }

  /** Removes sessions that ended by time: past expires_at, or idle longer than idleSeconds. */
  deleteExpired(now: number, idleSeconds: number): number {
    return this.db.prepare("DELETE FROM console_sessions WHERE expires_at <= ? OR last_seen_at + ? <= ?").run(now, idleSeconds, now).changes;
  }
}
