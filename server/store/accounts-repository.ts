import { newId, nowSeconds } from "../core/ids.js";
import type { Db } from "./database.js";

export interface AccountRow {
  id: string;
  name: string;
  status: string;
  created_at: number;
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
      const row: AccountRow = { id: newId("acct_"), name, status: "active", created_at: nowSeconds() };
      this.db.prepare("INSERT INTO accounts (id, name, status, created_at) VALUES (@id, @name, @status, @created_at)").run(row);
      return row;
    }).immediate();
  }
}
