// 0002: settings (the active model, and later other machine-wide choices) and where each model file came from.
export const sql = `
CREATE TABLE settings (
  key         TEXT PRIMARY KEY,
  value       TEXT NOT NULL,
  -- Milliseconds; a running server notices a changed setting by this (the value may be set again unchanged).
  updated_at  INTEGER NOT NULL
);

CREATE TABLE model_files (
  -- The file name inside <data-dir>/models.
  file        TEXT PRIMARY KEY,
  -- What \`svc models pull\` was given: hf:user/repo:quant, hf:user/repo/file.gguf or a URL.
  source      TEXT NOT NULL,
  -- downloading (a partial file may exist) or ready.
  state       TEXT NOT NULL,
  size_bytes  INTEGER,
  sha256      TEXT,
  updated_at  INTEGER NOT NULL
);
`;
