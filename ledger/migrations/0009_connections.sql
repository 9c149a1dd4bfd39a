-- Schema version 9.
-- Payroll connections (`paysync connect`): one per connect flow, each with
-- its own rotating refresh token, kept in credentials under the name
-- 'connection-<id>'. A company is served by at most one connection (the
-- newest connect of it wins); a connection serves every company listed for
-- it. state is what the daemon last saw: active, revoked (the token
-- endpoint refused the refresh token: invalid_grant) or failing (the
-- refresh failed otherwise).
CREATE TABLE IF NOT EXISTS connections (
  id            INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a new connection never gets the id (or credential name) of a removed one
  credential    TEXT    NOT NULL UNIQUE,
  created_at    TEXT    NOT NULL,
  state         TEXT    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'revoked', 'failing')),
  state_at      TEXT    NOT NULL,
  reason        TEXT    NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS connection_companies (
  company_id    TEXT    PRIMARY KEY,
  connection    INTEGER NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
  name          TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS connection_companies_by_connection ON connection_companies (connection);
