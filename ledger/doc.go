// Package ledger is paysync's SQLite ledger: the audit trail of every
// source, entry, batch, pay part, attempt and reject, and the state store
// that makes delivery exactly-once. It also keeps the rotated payroll
// refresh token (credentials).
//
// The file is opened with WAL, foreign keys, synchronous=FULL and one
// writer connection whose transactions BEGIN IMMEDIATE, beside a small pool
// of query_only readers (WAL lets them read while the writer commits), so
// that delivery's and operators' reads never queue behind intake. Intake
// (CommitImports) yields the writer to any other transaction between two
// messages. The file is created with mode 0600 and refused when others can
// read it. Migrations are embedded and
// applied in a transaction each at open (PRAGMA user_version); a ledger from
// a newer paysync, a damaged file, a locked file or an unwritable directory
// is an error that changes nothing. Every change is one short transaction,
// never held across a network call.
//
// # States
//
// The states are the typed strings of the root package (paysync.BatchState,
// PartState, EntryStatus, SourceStatus, SourceKind, AttemptOp,
// AttemptOutcome), stored as the TEXT the schema's CHECK constraints name.
//
//	source:   received ──► committed            (a rejected source keeps only its rejects)
//	          kind replay: a replay of stored entries (replay_of its import),
//	          or the re-drive of a rejected source's stored input
//
//	batch:    pending ──► sending ──► created ──► reverting ──► reverted
//	             ▲  │        │ │                      │
//	             │  │        │ └──► split (items move to child batches)
//	             │  │        ▼
//	             └──┴──── pending (not applied: retry; ambiguous: reconciled first)
//	                      failed  (attempts exhausted; the daemon retries it after a backoff
//	                               of 15 s doubling to 10 min, honouring Retry-After; a command, on its next run)
//	          pending | failed ──► reverted   (reverted before anything was created)
//
//	pay part: pending ──► created ──► deleted   (by paysync's revert, or superseded by a correction unit)
//	             │            └─────► gone      (deleted in payroll by someone else)
//	             └──► rejected                  (refused by the payroll API)
//
// A batch in sending means the outcome of its last create is unknown (a
// timeout, a reset, a crash): it is reconciled against payroll before any
// new send. Foreign pay parts (those in payroll that are not ours, recorded
// before the first send to a company) are never claimed by reconciliation.
//
// Entries are unique by their source id: an entry id already paid is a
// duplicate (same content) or a correction (different content, or a
// tombstone): recorded pending with its import (entry_corrections) and
// applied as one unit (ApplyCorrection: the entry's new content, the old in
// entry_versions, the pay parts it was in superseded, new ones in the unit's
// batches, which are sent only after the superseded ones are deleted). An
// entry that was rejected or skipped, or paid and no longer live, may come
// again with new content. A correction dated in a closed period is refused. An entry is live
// in payroll while a pay part of it is created, or pending in an open batch
// (LiveParts): a replay takes only entries that are not, unless forced.
package ledger
