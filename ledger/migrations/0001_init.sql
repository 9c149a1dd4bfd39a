-- paysync ledger, schema version 1. Decimals are TEXT (exact), times are
-- RFC 3339 UTC TEXT.

CREATE TABLE sources (
  id            INTEGER PRIMARY KEY,
  kind          TEXT    NOT NULL CHECK (kind IN ('file', 'stdin', 'nats', 'replay')),
  name          TEXT    NOT NULL,
  content_hash  TEXT    NOT NULL,
  format        TEXT    NOT NULL DEFAULT '',
  size          INTEGER NOT NULL DEFAULT 0,
  payload       BLOB,                          -- the raw input, gzip-compressed
  status        TEXT    NOT NULL CHECK (status IN ('received', 'committed', 'rejected')),
  entries       INTEGER NOT NULL DEFAULT 0,
  duplicates    INTEGER NOT NULL DEFAULT 0,
  rejects       INTEGER NOT NULL DEFAULT 0,
  replay_of     INTEGER REFERENCES sources (id),
  received_at   TEXT    NOT NULL
);
-- A file, stdin or message with the same content is the same source.
CREATE UNIQUE INDEX sources_content ON sources (content_hash) WHERE kind <> 'replay';

CREATE TABLE entries (
  id            INTEGER PRIMARY KEY,
  source_id     INTEGER NOT NULL REFERENCES sources (id),
  entry_id      TEXT    NOT NULL UNIQUE,        -- the source's id: the dedupe key
  line          INTEGER NOT NULL,
  content_hash  TEXT    NOT NULL,
  data          BLOB    NOT NULL,               -- the entry as JSON, for replay
  status        TEXT    NOT NULL CHECK (status IN ('mapped', 'skipped', 'rejected')),
  note          TEXT    NOT NULL DEFAULT ''     -- skip reason
);
CREATE INDEX entries_source ON entries (source_id);

CREATE TABLE batches (
  id            INTEGER PRIMARY KEY,
  company_id    TEXT    NOT NULL,
  source_id     INTEGER REFERENCES sources (id),
  parent_id     INTEGER REFERENCES batches (id), -- split from
  replay_of     INTEGER REFERENCES batches (id),
  state         TEXT    NOT NULL CHECK (state IN ('pending', 'sending', 'created', 'failed', 'split', 'reverting', 'reverted')),
  attempts      INTEGER NOT NULL DEFAULT 0,
  last_error    TEXT    NOT NULL DEFAULT '',
  created_at    TEXT    NOT NULL,
  updated_at    TEXT    NOT NULL
);
CREATE INDEX batches_state ON batches (state);
CREATE INDEX batches_source ON batches (source_id);

CREATE TABLE pay_parts (
  id            INTEGER PRIMARY KEY,
  batch_id      INTEGER NOT NULL REFERENCES batches (id),
  seq           INTEGER NOT NULL,
  company_id    TEXT    NOT NULL,
  employee_id   TEXT    NOT NULL,
  employee_name TEXT    NOT NULL DEFAULT '',
  code          TEXT    NOT NULL,
  units         TEXT,
  rate          TEXT,
  amount        TEXT,
  description   TEXT    NOT NULL DEFAULT '',
  rule          TEXT    NOT NULL DEFAULT '',
  state         TEXT    NOT NULL CHECK (state IN ('pending', 'created', 'rejected', 'deleted', 'gone')),
  payroll_id    TEXT    UNIQUE,
  error         TEXT    NOT NULL DEFAULT '',
  updated_at    TEXT    NOT NULL
);
CREATE INDEX pay_parts_batch ON pay_parts (batch_id);
CREATE INDEX pay_parts_company ON pay_parts (company_id, state);

CREATE TABLE pay_part_entries (
  pay_part_id   INTEGER NOT NULL REFERENCES pay_parts (id),
  entry_id      INTEGER NOT NULL REFERENCES entries (id),
  PRIMARY KEY (pay_part_id, entry_id)
);
CREATE INDEX pay_part_entries_entry ON pay_part_entries (entry_id);

CREATE TABLE attempts (
  id            INTEGER PRIMARY KEY,
  batch_id      INTEGER NOT NULL REFERENCES batches (id),
  op            TEXT    NOT NULL CHECK (op IN ('create', 'delete', 'reconcile')),
  items         INTEGER NOT NULL,
  started_at    TEXT    NOT NULL,
  finished_at   TEXT,
  outcome       TEXT    NOT NULL DEFAULT 'in_flight',
  status        INTEGER NOT NULL DEFAULT 0,
  error         TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX attempts_batch ON attempts (batch_id);

CREATE TABLE rejects (
  id            INTEGER PRIMARY KEY,
  source_id     INTEGER REFERENCES sources (id),
  batch_id      INTEGER REFERENCES batches (id),
  entry_id      TEXT    NOT NULL DEFAULT '',
  line          INTEGER NOT NULL DEFAULT 0,
  field         TEXT    NOT NULL DEFAULT '',
  message       TEXT    NOT NULL,
  hint          TEXT    NOT NULL DEFAULT '',
  created_at    TEXT    NOT NULL
);
CREATE INDEX rejects_source ON rejects (source_id);

-- Pay parts seen in payroll that are not ours, recorded before we send to
-- a company: reconciliation never claims one of them.
CREATE TABLE foreign_pay_parts (
  company_id    TEXT NOT NULL,
  payroll_id    TEXT NOT NULL,
  seen_at       TEXT NOT NULL,
  PRIMARY KEY (company_id, payroll_id)
);
CREATE TABLE company_snapshots (
  company_id    TEXT PRIMARY KEY,
  taken_at      TEXT NOT NULL
);

CREATE TABLE credentials (
  name          TEXT PRIMARY KEY,
  refresh_token TEXT NOT NULL,
  seed          TEXT NOT NULL,
  updated_at    TEXT NOT NULL
);
