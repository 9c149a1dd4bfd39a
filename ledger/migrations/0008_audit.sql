-- Schema version 8.
-- The console's audit log: every action an operator takes there (revert,
-- replay, close or open a period), who and from where, what it was about,
-- and how it ended. token is the one-time token of the confirmation form
-- that asked for it: a second submit of the same form finds its row and
-- changes nothing. Times are UTC.
CREATE TABLE audit_log (
  id          INTEGER PRIMARY KEY,
  token       TEXT    UNIQUE,            -- the form's one-time token (NULL: not from a form)
  actor       TEXT    NOT NULL,          -- "console" (login form), "basic:NAME" (Basic auth), "cli"
  remote      TEXT    NOT NULL,          -- the remote address ("" for the CLI)
  action      TEXT    NOT NULL,          -- revert, replay, close, open
  scope       TEXT    NOT NULL,          -- batch 12, import 3, period 2026-11 …
  result      TEXT    NOT NULL,          -- started, done, failed
  detail      TEXT    NOT NULL DEFAULT '',
  started_at  TEXT    NOT NULL,
  finished_at TEXT
);
