-- Schema version 12.
-- A merge reads the oldest held entries (ORDER BY id LIMIT n). Without an
-- index in id order over the held ones, that read scans the entries table
-- from its first row, through every entry paid long ago, at each merge.
CREATE INDEX entries_held_id ON entries (id) WHERE note = 'held';
