import type { Db } from "./database.js";

export interface SettingRow {
  key: string;
  value: string;
  updated_at: number;
}

/** Machine-wide settings, one value per key. */
export class SettingsRepository {
  constructor(private readonly db: Db) {}

  get(key: string): SettingRow | undefined {
    return this.db.prepare("SELECT * FROM settings WHERE key = ?").get(key) as SettingRow | undefined;
  }

  /** Writes the value and a fresh updated_at, also when the value is unchanged (a request to apply it again). */
  set(key: string, value: string, at: number = Date.now()): void {
    this.db
      .prepare("INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at")
      .run(key, value, at);
  }

  delete(key: string): boolean {
    return this.db.prepare("DELETE FROM settings WHERE key = ?").run(key).changes > 0;
  }
}
