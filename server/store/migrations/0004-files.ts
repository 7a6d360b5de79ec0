// 0004: uploaded files (the bytes and their extracted content live in <data-dir>/files/<id>/) and the
// upload log behind the per-user hourly upload limit.
export const sql = `
CREATE TABLE files (
  id              TEXT PRIMARY KEY,
  account_id      TEXT NOT NULL REFERENCES accounts(id),
  filename        TEXT NOT NULL,
  purpose         TEXT NOT NULL,
  -- Detected from the bytes, never taken from the client.
  mime_type       TEXT NOT NULL,
  size_bytes      INTEGER NOT NULL,
  -- uploaded (content being extracted), processed, or error (status_details says why).
  status          TEXT NOT NULL,
  status_details  TEXT,
  -- text, pdf, image, audio, video or iwork.
  content_kind    TEXT NOT NULL,
  token_estimate  INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL
);
CREATE INDEX files_account ON files(account_id, created_at);
CREATE INDEX files_expiry ON files(expires_at);

-- One row per accepted upload, kept for an hour: deleting a file does not give its upload back.
CREATE TABLE file_uploads (
  account_id  TEXT NOT NULL,
  at          INTEGER NOT NULL
);
CREATE INDEX file_uploads_account ON file_uploads(account_id, at);
`;
