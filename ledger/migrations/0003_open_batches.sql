-- Schema version 3.
-- Streaming sources (NATS) add pay parts to a company's open batch until
-- it is full or has waited long enough (linger); only sealed batches are
-- sent. File imports create sealed batches.
ALTER TABLE batches ADD COLUMN sealed INTEGER NOT NULL DEFAULT 1;
CREATE INDEX batches_unsealed ON batches (company_id) WHERE sealed = 0;
