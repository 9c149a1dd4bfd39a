-- Schema version 5.
-- The raw input of a source larger than one chunk, in order of seq, each
-- chunk one gzip stream of at most 1 MiB of input (sources.payload is then
-- NULL): an import never holds its whole input in memory, neither when it
-- is stored nor when it is read back. Concatenated, the chunks are one
-- multi-member gzip stream of the input.
CREATE TABLE source_chunks (
  source_id     INTEGER NOT NULL REFERENCES sources (id),
  seq           INTEGER NOT NULL,
  data          BLOB    NOT NULL,
  PRIMARY KEY (source_id, seq)
);
