-- Schema version 11.
-- Why a pending correction was not applied the last time the corrector
-- tried it (a payroll server without a delete mutation, …), for the
-- operator's `paysync corrections`; '' when never held up.
ALTER TABLE entry_corrections ADD COLUMN waiting TEXT NOT NULL DEFAULT '';
