import { newId, nowSeconds } from "../core/ids.js";
import type { Db } from "./database.js";

export interface AccountRow {
  id: string;
  name: string;
  /** active or disabled. */
  status: string;
  created_at: number;
  /** NULL: no console login (see migration 0003). */
  password_hash: string | null;
  must_change_password: number;
  password_changed_at: number | null;
  last_login_at: number | null;
  disabled_at: number | null;
}

export const DEFAULT_ACCOUNT_NAME = "local";

export class AccountRepository {
  constructor(private readonly db: Db) {}

  findByName(name: string): AccountRow | undefined {
    return this.db.prepare("SELECT * FROM accounts WHERE name = ?").get(name) as AccountRow | undefined;
  }

  findById(id: string): AccountRow | undefined {
    return this.db.prepare("SELECT * FROM accounts WHERE id = ?").get(id) as AccountRow | undefined;
  }

  list(): AccountRow[] {
    return this.db.prepare("SELECT * FROM accounts ORDER BY created_at, name").all() as AccountRow[];
  }

  /** Returns the account with this name, creating it if needed. */
  ensure(name: string): AccountRow {
    return this.db.transaction(() => {
      const found = this.findByName(name);
      if (found) return found;
      this.db.prepare("INSERT INTO accounts (id, name, status, created_at) VALUES (?, ?, 'active', ?)").run(newId("acct_"), name, nowSeconds());
      return this.findByName(name)!;
    }).immediate();
  }

  /** A new account with a password; undefined if the name is taken. */
  insert(name: string, passwordHash: string, mustChangePassword: boolean, at: number): AccountRow | undefined {
    const result = this.db
      .prepare(
        `INSERT INTO accounts (id, name, status, created_at, password_hash, must_change_password, password_changed_at)
         VALUES (?, ?, 'active', ?, ?, ?, ?) ON CONFLICT(name) DO NOTHING`,
      )
      .run(newId("acct_"), name, at, passwordHash, mustChangePassword ? 1 : 0, at);
    return result.changes > 0 ? this.findByName(name) : undefined;
  }

  setPassword(id: string, passwordHash: string, mustChangePassword: boolean, at: number): void {
    this.db
      .prepare("UPDATE accounts SET password_hash = ?, must_change_password = ?, password_changed_at = ? WHERE id = ?")
      .run(passwordHash, mustChangePassword ? 1 : 0, at, id);
  }

  setStatus(id: string, status: "active" | "disabled", at: number): void {
    this.db.prepare("UPDATE accounts SET status = ?, disabled_at = ? WHERE id = ?").run(status, status === "disabled" ? at : null, id);
  }

  touchLogin(id: string, at: number): void {
    this.db.prepare("UPDATE accounts SET last_login_at = ? WHERE id = ?").run(at, id);
  }
}
