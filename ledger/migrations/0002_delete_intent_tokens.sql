-- Schema version 2.
-- The delete attempt a pay part was sent in: a revert records it before
-- delete_pay_parts is called, so that after a crash a pay part missing from
-- payroll is known to be deleted by paysync, not by someone else.
ALTER TABLE pay_parts ADD COLUMN delete_attempt INTEGER REFERENCES attempts (id);

-- The current access token, so that processes started within its lifetime
-- reuse it instead of spending (and rotating) the refresh token.
ALTER TABLE credentials ADD COLUMN access_token TEXT NOT NULL DEFAULT '';
ALTER TABLE credentials ADD COLUMN access_expiry TEXT NOT NULL DEFAULT '';
ALTER TABLE credentials ADD COLUMN access_issued TEXT NOT NULL DEFAULT '';
