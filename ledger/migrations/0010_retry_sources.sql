-- Schema version 10.
-- The same content imported again after an import of it had rejects (rows
-- refused for a fault fixed since outside the file: the rules, a closed
-- period opened) is taken again, not skipped as a duplicate: entries that
-- landed the first time are duplicates, the refused ones get another
-- chance. retry_of names the import it takes again; the latest of them is
-- the one the content counts as imported by.
ALTER TABLE sources ADD COLUMN retry_of INTEGER REFERENCES sources (id);
DROP INDEX sources_content;
CREATE UNIQUE INDEX sources_content ON sources (content_hash, coalesce(retry_of, 0)) WHERE kind <> 'replay' AND status = 'committed';
CREATE INDEX sources_retry ON sources (retry_of) WHERE retry_of IS NOT NULL;
-- Corrections refused after their import was committed added rejects
-- without counting them.
UPDATE sources SET rejects = (SELECT count(*) FROM rejects r WHERE r.source_id = sources.id) WHERE status = 'committed';
