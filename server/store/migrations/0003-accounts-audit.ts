// 0003: console logins for accounts (a password, forced change, disabling), their console sessions, and the
// audit records (one per request to a key endpoint; never any content).
export const sql = `
-- scrypt$N$r$p$salt$hash (see server/features/accounts/passwords.ts); NULL: the account cannot log in to the
-- console (the default account 'local', and accounts made before 0003) until the operator resets its password.
ALTER TABLE accounts ADD COLUMN password_hash TEXT;
-- 1 while the password is a temporary one from the operator: the first login must change it.
ALTER TABLE accounts ADD COLUMN must_change_password INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN password_changed_at INTEGER;
ALTER TABLE accounts ADD COLUMN last_login_at INTEGER;
ALTER TABLE accounts ADD COLUMN disabled_at INTEGER;

CREATE TABLE console_sessions (
  -- SHA-256 of the session cookie's value; the value itself is never stored.
  token_hash    TEXT PRIMARY KEY,
  account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  csrf_token    TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  last_seen_at  INTEGER NOT NULL,
  -- Epoch seconds; the session ends at the earlier of this and last_seen_at plus the idle timeout.
  expires_at    INTEGER NOT NULL
);
CREATE INDEX console_sessions_account ON console_sessions(account_id);

CREATE TABLE audit_records (
  request_id        TEXT PRIMARY KEY,
  account_id        TEXT NOT NULL,
  key_id            TEXT NOT NULL,
  -- Epoch milliseconds when the request arrived.
  created_ms        INTEGER NOT NULL,
  surface           TEXT NOT NULL,
  method            TEXT NOT NULL,
  -- The route, with its parameters as {name} (never the ids in them).
  path              TEXT NOT NULL,
  model             TEXT,
  mode              TEXT,
  status            INTEGER NOT NULL,
  error_code        TEXT,
  stop_reason       TEXT,
  aborted           INTEGER NOT NULL DEFAULT 0,
  latency_ms        INTEGER NOT NULL,
  ttft_ms           INTEGER,
  queued_ms         INTEGER,
  input_tokens      INTEGER,
  output_tokens     INTEGER,
  reasoning_tokens  INTEGER,
  cached_tokens     INTEGER,
  session_id        TEXT,
  batch_id          TEXT,
  run_id            TEXT
);
CREATE INDEX audit_records_account_time ON audit_records(account_id, created_ms, request_id);
CREATE INDEX audit_records_time ON audit_records(created_ms);
`;
