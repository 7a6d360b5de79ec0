// 0005: message batches. The one place where request content is kept at rest, because the caller asked
// for it: each request's params until it has run, each result until the batch is deleted or its results
// expire. Deletes overwrite the freed bytes (see BatchRepository.erase).
export const sql = `
CREATE TABLE message_batches (
  -- Order of creation; list pages walk it (an explicit INTEGER PRIMARY KEY survives VACUUM).
  seq                  INTEGER PRIMARY KEY AUTOINCREMENT,
  id                   TEXT NOT NULL UNIQUE,
  account_id           TEXT NOT NULL,
  -- uploading (the create request is still being read; invisible), in_progress, canceling, ended
  status               TEXT NOT NULL,
  request_count        INTEGER NOT NULL DEFAULT 0,
  succeeded            INTEGER NOT NULL DEFAULT 0,
  errored              INTEGER NOT NULL DEFAULT 0,
  canceled             INTEGER NOT NULL DEFAULT 0,
  expired              INTEGER NOT NULL DEFAULT 0,
  -- Epoch milliseconds.
  created_at           INTEGER NOT NULL,
  expires_at           INTEGER NOT NULL,
  ended_at             INTEGER,
  cancel_initiated_at  INTEGER,
  archived_at          INTEGER,
  idempotency_key      TEXT,
  body_sha256          TEXT
);
CREATE INDEX message_batches_account ON message_batches(account_id, seq);
CREATE INDEX message_batches_status ON message_batches(status, seq);
CREATE UNIQUE INDEX message_batches_idempotency ON message_batches(account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE message_batch_requests (
  batch_seq   INTEGER NOT NULL REFERENCES message_batches(seq) ON DELETE CASCADE,
  idx         INTEGER NOT NULL,
  custom_id   TEXT NOT NULL,
  -- pending, running, succeeded, errored, canceled, expired
  state       TEXT NOT NULL DEFAULT 'pending',
  -- The Messages request body (JSON) until the request has run; then NULL.
  params      TEXT,
  -- The result object of the results line (JSON), once the request has ended.
  result      TEXT,
  started_at  INTEGER,
  ended_at    INTEGER,
  PRIMARY KEY (batch_seq, idx)
);
CREATE INDEX message_batch_requests_pending ON message_batch_requests(batch_seq, idx) WHERE state = 'pending';
CREATE INDEX message_batch_requests_running ON message_batch_requests(state) WHERE state = 'running';
`;
