-- The desired state (round 3): every entry's versions, one per import that
-- brought it; each version's lines (what the rules made of it) in their
-- groups (company × employee × code × rate × period); each group's exact
-- totals of the lines that count; pay parts tied to their group. One
-- reconciler plans pay parts from groups (dirty: their totals changed).
CREATE TABLE versions (
  id            INTEGER PRIMARY KEY,
  entry         INTEGER NOT NULL REFERENCES entries (id),
  source_id     INTEGER NOT NULL REFERENCES sources (id),
  line          INTEGER NOT NULL DEFAULT 0,
  content_hash  TEXT    NOT NULL,
  data          BLOB    NOT NULL,
  status        TEXT    NOT NULL,      -- mapped, skipped (a tombstone: note 'deleted'), rejected
  note          TEXT    NOT NULL DEFAULT '',
  entry_date    TEXT    NOT NULL DEFAULT '',
  pending       INTEGER NOT NULL DEFAULT 0 -- a version from before, its lines not mapped yet
);
CREATE INDEX versions_entry ON versions (entry, source_id);
CREATE INDEX versions_source ON versions (source_id);
CREATE INDEX versions_pending ON versions (id) WHERE pending = 1;

CREATE TABLE groups (
  id            INTEGER PRIMARY KEY,
  company_id    TEXT    NOT NULL,
  employee_id   TEXT    NOT NULL,
  code          TEXT    NOT NULL,
  rate          TEXT    NOT NULL,      -- '-' without a rate
  period        TEXT    NOT NULL,      -- as written: 2026-11, 2026-W45
  first_day     TEXT    NOT NULL,
  last_day      TEXT    NOT NULL,
  own           TEXT    NOT NULL DEFAULT '', -- aggregate: false: the entry's key (one group per entry line)
  employee_name TEXT    NOT NULL DEFAULT '',
  description   TEXT    NOT NULL DEFAULT '',
  rule          TEXT    NOT NULL DEFAULT '', -- the rule of its first line (finishing: units from hours, amount product)
  from_hours    INTEGER NOT NULL DEFAULT 0,
  seconds       TEXT,                  -- exact sums of the lines that count
  units         TEXT,
  amount        TEXT,
  lines         INTEGER NOT NULL DEFAULT 0,
  version       INTEGER NOT NULL DEFAULT 0,
  dirty         INTEGER NOT NULL DEFAULT 0,
  dirty_at      TEXT    NOT NULL DEFAULT '', -- since when (a plan's part-full batch waits for more until the linger)
  UNIQUE (company_id, employee_id, code, rate, period, own)
);
CREATE INDEX groups_dirty ON groups (id) WHERE dirty = 1;
CREATE INDEX groups_period ON groups (first_day, last_day);

CREATE TABLE lines (
  version       INTEGER NOT NULL REFERENCES versions (id),
  seq           INTEGER NOT NULL,
  group_id      INTEGER NOT NULL REFERENCES groups (id),
  seconds       TEXT,
  units         TEXT,
  amount        TEXT,
  counts        INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (version, seq)
) WITHOUT ROWID;
CREATE INDEX lines_group ON lines (group_id) WHERE counts = 1;

ALTER TABLE pay_parts ADD COLUMN group_id INTEGER REFERENCES groups (id);
CREATE INDEX pay_parts_group ON pay_parts (group_id) WHERE group_id IS NOT NULL;
CREATE INDEX pay_parts_untied ON pay_parts (id) WHERE group_id IS NULL AND state IN ('created', 'pending');
ALTER TABLE sources ADD COLUMN reverted INTEGER NOT NULL DEFAULT 0;
-- Why an entry does not count although its version would: excluded by the
-- revert of a batch (by: the batch) or of a period (by: -1), each lifted by
-- its replay; every one by a later import listing the entry.
CREATE TABLE exclusions (
  entry         INTEGER NOT NULL REFERENCES entries (id),
  by            INTEGER NOT NULL,
  PRIMARY KEY (entry, by)
) WITHOUT ROWID;
CREATE INDEX exclusions_by ON exclusions (by);
-- A ledger from before: its entries are taken into the desired state by
-- the first process with rules (their lines mapped then, their pay parts
-- tied to their groups) before anything is planned.
ALTER TABLE entries ADD COLUMN legacy INTEGER NOT NULL DEFAULT 0;
UPDATE entries SET legacy = 1 WHERE status = 'mapped' AND note <> 'held';
-- An entry from before that payroll no longer holds (its batch reverted,
-- its pay part refused) does not count until it is replayed or listed again.
INSERT INTO exclusions (entry, by)
  SELECT id, coalesce((SELECT max(p.batch_id) FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id WHERE pe.entry_id = entries.id), -1)
  FROM entries WHERE legacy = 1 AND NOT EXISTS (SELECT 1 FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id
    JOIN batches b ON b.id = p.batch_id
    WHERE pe.entry_id = entries.id AND p.superseded_by IS NULL
      AND (p.state = 'created' OR (p.state = 'pending' AND b.state IN ('pending', 'sending', 'failed'))));
INSERT INTO versions (entry, source_id, line, content_hash, data, status, note, entry_date, pending)
  SELECT v.entry, v.source_id, v.line, v.content_hash, v.data, v.status, '', coalesce(json_extract(CAST(v.data AS TEXT), '$.date'), ''), 1
  FROM entry_versions v JOIN entries e ON e.id = v.entry WHERE e.legacy = 1 ORDER BY v.id;
INSERT INTO versions (entry, source_id, line, content_hash, data, status, note, entry_date, pending)
  SELECT id, source_id, line, content_hash, data, status, note, entry_date, 1 FROM entries WHERE legacy = 1 ORDER BY id;
-- A batch revert left half done (reverting): its entries are out, as the
-- revert said; the start-up finishes its deletes.
INSERT OR IGNORE INTO exclusions (entry, by)
  SELECT pe.entry_id, p.batch_id FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id
    JOIN batches b ON b.id = p.batch_id JOIN entries e ON e.id = pe.entry_id
  WHERE b.state = 'reverting' AND e.legacy = 1;
CREATE INDEX entries_legacy ON entries (id) WHERE legacy = 1;
-- The reconciler's units are corrections rows of the source 0 when no
-- import caused them.
INSERT INTO sources (id, kind, name, content_hash, status, received_at)
  SELECT 0, 'replay', 'reconcile', '', 'committed', strftime('%Y-%m-%dT%H:%M:%fZ') WHERE NOT EXISTS (SELECT 1 FROM sources WHERE id = 0);
