-- Schema version 6.
-- The sealed batches still to send, by company: the sending loop looks
-- at them after every intake commit, and with a backlog of thousands of
-- batches it must find each company's oldest with an index seek, not by
-- reading them all.
CREATE INDEX batches_open ON batches (company_id, id) WHERE state IN ('pending', 'sending', 'failed') AND sealed = 1;
