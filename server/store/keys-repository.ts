import type { Db } from "./database.js";

export interface ApiKeyRow {
  id: string;
  account_id: string;
  name: string | null;
  key_hash: string;
  last_four: string;
  reasoning_trace: number;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export class KeyRepository {
  constructor(private readonly db: Db) {}

  insert(row: ApiKeyRow): void {
    this.db
      .prepare(
        `INSERT INTO api_keys (id, account_id, name, key_hash, last_four, reasoning_trace, created_at, last_used_at, revoked_at)
         VALUES (@id, @account_id, @name, @key_hash, @last_four, @reasoning_trace, @created_at, @last_used_at, @revoked_at)`,
      )
      .run(row);
  }

  findByHash(hash: string): ApiKeyRow | undefined {
    return this.db.prepare("SELECT * FROM api_keys WHERE key_hash = ?").get(hash) as ApiKeyRow | undefined;
  }

  findById(id: string): ApiKeyRow | undefined {
    return this.db.prepare("SELECT * FROM api_keys WHERE id = ?").get(id) as ApiKeyRow | undefined;
  }

  list(accountId?: string): ApiKeyRow[] {
    if (accountId) return this.db.prepare("SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id").all(accountId) as ApiKeyRow[];
    return this.db.prepare("SELECT * FROM api_keys ORDER BY created_at, id").all() as ApiKeyRow[];
  }

  revoke(id: string, at: number): boolean {
    return this.db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(at, id).changes > 0;
  }

  setReasoningTrace(id: string, enabled: boolean): boolean {
    return this.db.prepare("UPDATE api_keys SET reasoning_trace = ? WHERE id = ?").run(enabled ? 1 : 0, id).changes > 0;
  }

  touch(id: string, at: number): void {
    this.db.prepare("UPDATE api_keys SET last_used_at = ? WHERE id = ?").run(at, id);
  }
}
