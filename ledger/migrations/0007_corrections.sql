-- Schema version 7.
-- Corrections: an entry arriving again with the same identity and other
-- content supersedes the version paid before. Intake records the new
-- version as a pending correction (with its import, atomically); the
-- corrector applies it as one unit: the entry's row takes the new content
-- (the old one kept in entry_versions), the pay parts the old version was
-- in are superseded (deleted in payroll before anything else of the unit
-- is sent), and their entries are planned again into a new batch that
-- waits for those deletes.
CREATE TABLE entry_corrections (
  id            INTEGER PRIMARY KEY,
  entry         INTEGER NOT NULL REFERENCES entries (id),
  source_id     INTEGER NOT NULL REFERENCES sources (id), -- the import that brought it
  line          INTEGER NOT NULL,
  content_hash  TEXT    NOT NULL,
  data          BLOB    NOT NULL,
  state         TEXT    NOT NULL CHECK (state IN ('pending', 'applied', 'unchanged', 'rejected')),
  correction    INTEGER REFERENCES corrections (id),    -- the unit that applied it
  created_at    TEXT    NOT NULL
);
CREATE INDEX entry_corrections_pending ON entry_corrections (entry) WHERE state = 'pending';

-- One unit an operator sees: what it replaced and what it sends instead.
CREATE TABLE corrections (
  id            INTEGER PRIMARY KEY,
  source_id     INTEGER NOT NULL REFERENCES sources (id),
  company_id    TEXT    NOT NULL,
  entries       INTEGER NOT NULL,   -- entries corrected
  superseded    INTEGER NOT NULL,   -- pay parts replaced
  created_at    TEXT    NOT NULL
);

-- The versions an entry had before a correction.
CREATE TABLE entry_versions (
  id            INTEGER PRIMARY KEY,
  entry         INTEGER NOT NULL REFERENCES entries (id),
  source_id     INTEGER NOT NULL REFERENCES sources (id),
  line          INTEGER NOT NULL,
  content_hash  TEXT    NOT NULL,
  data          BLOB    NOT NULL,
  status        TEXT    NOT NULL,
  correction    INTEGER NOT NULL REFERENCES corrections (id)
);
CREATE INDEX entry_versions_entry ON entry_versions (entry);

-- A pay part a correction replaces: deleted in payroll (or, never sent,
-- simply not sent) before the correction's batch goes out.
ALTER TABLE pay_parts ADD COLUMN superseded_by INTEGER REFERENCES corrections (id);
CREATE INDEX pay_parts_superseded ON pay_parts (superseded_by) WHERE superseded_by IS NOT NULL;
-- A correction's batch: sent only once the pay parts it replaces are gone.
ALTER TABLE batches ADD COLUMN correction_id INTEGER REFERENCES corrections (id);

-- An entry's origin (the source it is a statement of: the format or
-- preset name, --source, or a NATS subject's source token) and its date,
-- for period statements and the periods view.
ALTER TABLE entries ADD COLUMN origin TEXT NOT NULL DEFAULT '';
ALTER TABLE entries ADD COLUMN entry_date TEXT NOT NULL DEFAULT '';
UPDATE entries SET entry_date = coalesce(json_extract(CAST(data AS TEXT), '$.date'), ''),
  origin = coalesce((SELECT s.format FROM sources s WHERE s.id = entries.source_id AND s.kind IN ('file', 'stdin')), '');
CREATE INDEX entries_held ON entries (entry_date) WHERE note = 'held';

-- Periods closed by an operator once payroll has run: a correction of an
-- entry dated in one is refused.
CREATE TABLE closed_periods (
  period        TEXT PRIMARY KEY,   -- as written: 2026-11, 2026-W45, 2026-11-02..2026-11-15
  first_day     TEXT NOT NULL,
  last_day      TEXT NOT NULL,
  closed_at     TEXT NOT NULL,
  note          TEXT NOT NULL DEFAULT ''
);
