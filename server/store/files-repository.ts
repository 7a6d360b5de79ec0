import type { Db } from "./database.js";

export type FileStatus = "uploaded" | "processed" | "error";

export interface FileRow {
  id: string;
  account_id: string;
  filename: string;
  purpose: string;
  mime_type: string;
  size_bytes: number;
  status: FileStatus;
  status_details: string | null;
  content_kind: string;
  token_estimate: number;
  created_at: number;
  expires_at: number;
}

export interface FilePage {
  rows: FileRow[];
  hasMore: boolean;
}

/** Files are per account; an expired file reads as absent everywhere (the sweeper removes it later). */
export class FileRepository {
  constructor(private readonly db: Db) {}

  insert(row: FileRow): void {
    this.db
      .prepare(
        `INSERT INTO files (id, account_id, filename, purpose, mime_type, size_bytes, status, status_details, content_kind, token_estimate, created_at, expires_at)
         VALUES (@id, @account_id, @filename, @purpose, @mime_type, @size_bytes, @status, @status_details, @content_kind, @token_estimate, @created_at, @expires_at)`,
      )
      .run(row);
  }

  /** Inserts the file and logs the upload in one transaction. */
  insertUpload(row: FileRow): void {
    this.db.transaction(() => {
      this.insert(row);
      this.db.prepare("INSERT INTO file_uploads (account_id, at) VALUES (?, ?)").run(row.account_id, row.created_at);
    })();
  }

  find(id: string, accountId: string, now: number): FileRow | undefined {
    return this.db.prepare("SELECT * FROM files WHERE id = ? AND account_id = ? AND expires_at > ?").get(id, accountId, now) as FileRow | undefined;
  }

  findAny(id: string): FileRow | undefined {
    return this.db.prepare("SELECT * FROM files WHERE id = ?").get(id) as FileRow | undefined;
  }

  /** Newest first by default (upload order: rowid, so files of the same second keep theirs); `after` is the id of the last file of the previous page. */
  list(accountId: string, now: number, options: { limit: number; order: "asc" | "desc"; after?: string; purpose?: string }): FilePage {
    const params: unknown[] = [accountId, now];
    let where = "account_id = ? AND expires_at > ?";
    if (options.purpose) {
      where += " AND purpose = ?";
      params.push(options.purpose);
    }
    if (options.after) {
      const cursor = this.db.prepare("SELECT rowid AS seq FROM files WHERE id = ? AND account_id = ?").get(options.after, accountId) as { seq: number } | undefined;
      if (cursor) {
        where += options.order === "desc" ? " AND rowid < ?" : " AND rowid > ?";
        params.push(cursor.seq);
      }
    }
    const rows = this.db
      .prepare(`SELECT * FROM files WHERE ${where} ORDER BY rowid ${options.order === "desc" ? "DESC" : "ASC"} LIMIT ?`)
      .all(...params, options.limit + 1) as FileRow[];
    return { rows: rows.slice(0, options.limit), hasMore: rows.length > options.limit };
  }

  countStored(accountId: string, now: number): number {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM files WHERE account_id = ? AND expires_at > ?").get(accountId, now) as { n: number }).n;
  }

  /** Upload times of this account since `since`, oldest first. */
  uploadsSince(accountId: string, since: number): number[] {
    return (this.db.prepare("SELECT at FROM file_uploads WHERE account_id = ? AND at > ? ORDER BY at").all(accountId, since) as Array<{ at: number }>).map(
      (r) => r.at,
    );
  }

  pruneUploads(before: number): void {
    this.db.prepare("DELETE FROM file_uploads WHERE at <= ?").run(before);
  }

  setResult(id: string, result: { status: FileStatus; statusDetails: string | null; tokenEstimate: number }): void {
    this.db
      .prepare("UPDATE files SET status = ?, status_details = ?, token_estimate = ? WHERE id = ?")
      .run(result.status, result.statusDetails, result.tokenEstimate, id);
  }

  delete(id: string): boolean {
    return this.db.prepare("DELETE FROM files WHERE id = ?").run(id).changes > 0;
  }

  expired(now: number): string[] {
    return (this.db.prepare("SELECT id FROM files WHERE expires_at <= ?").all(now) as Array<{ id: string }>).map((r) => r.id);
  }

  allIds(): Set<string> {
    return new Set((this.db.prepare("SELECT id FROM files").all() as Array<{ id: string }>).map((r) => r.id));
  }
}
