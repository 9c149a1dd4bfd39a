-- Schema version 4.
-- A source refused as a whole (all-or-nothing) is kept with its rejects
-- for the audit trail; only committed sources count as "already imported".
DROP INDEX sources_content;
CREATE UNIQUE INDEX sources_content ON sources (content_hash) WHERE kind <> 'replay' AND status = 'committed';
