// 0001: accounts and API keys.
export const sql = `
CREATE TABLE accounts (
  id          TEXT PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  status      TEXT NOT NULL DEFAULT 'active',
  created_at  INTEGER NOT NULL
);

CREATE TABLE api_keys (
  id               TEXT PRIMARY KEY,
  account_id       TEXT NOT NULL REFERENCES accounts(id),
  name             TEXT,
  -- SHA-256 of the whole key, hex. The key itself is never stored.
  key_hash         TEXT NOT NULL UNIQUE,
  -- The last four characters, so a person can tell keys apart in a list.
  last_four        TEXT NOT NULL,
  reasoning_trace  INTEGER NOT NULL DEFAULT 0,
  created_at       INTEGER NOT NULL,
  last_used_at     INTEGER,
  revoked_at       INTEGER
);
CREATE INDEX api_keys_account ON api_keys(account_id);
`;
