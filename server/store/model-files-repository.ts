import type { Db } from "./database.js";

export interface ModelFileRow {
  file: string;
  source: string;
  state: "downloading" | "ready";
  size_bytes: number | null;
  sha256: string | null;
  updated_at: number;
}

/** Where each file in the models folder came from; rows for files added by hand do not exist. */
export class ModelFileRepository {
  constructor(private readonly db: Db) {}

  get(file: string): ModelFileRow | undefined {
    return this.db.prepare("SELECT * FROM model_files WHERE file = ?").get(file) as ModelFileRow | undefined;
  }

  list(): ModelFileRow[] {
    return this.db.prepare("SELECT * FROM model_files ORDER BY file").all() as ModelFileRow[];
  }

  upsert(row: ModelFileRow): void {
    this.db
      .prepare(
        `INSERT INTO model_files (file, source, state, size_bytes, sha256, updated_at)
         VALUES (@file, @source, @state, @size_bytes, @sha256, @updated_at)
         ON CONFLICT(file) DO UPDATE SET source = excluded.source, state = excluded.state, size_bytes = excluded.size_bytes,
           sha256 = excluded.sha256, updated_at = excluded.updated_at`,
      )
      .run(row);
  }

  delete(file: string): boolean {
    return this.db.prepare("DELETE FROM model_files WHERE file = ?").run(file).changes > 0;
  }
}
