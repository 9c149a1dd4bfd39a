// Package ledger is paysync's SQLite ledger: the audit trail of every
// source, entry, batch, pay part, attempt and reject; the desired state
// (each entry's versions, their lines, the groups' exact totals); the
// state store that makes delivery exactly once; and the payroll
// connections and rotated refresh tokens.
//
// The file is opened with WAL, foreign keys, synchronous=FULL and one
// writer connection whose transactions BEGIN IMMEDIATE, beside a small pool
// of query_only readers; intake (CommitImports) yields the writer to any
// other transaction between two messages. The file is created with mode
// 0600 and refused when others can read it. Migrations are embedded and
// applied in a transaction each at open (PRAGMA user_version); a ledger
// from a newer paysync, a damaged or locked file or an unwritable
// directory is an error that changes nothing. Every change is one short
// transaction, never held across a network call.
//
// One definition each: what counts (recount: an entry's current version,
// the latest of an import not reverted, mapped, not a tombstone, the entry
// not excluded), what is live in payroll (livePartsWhere), and what is
// frozen (a group of a closed period: never planned, and a send begun
// after the close leaves it alone). Revert and Replay change only what
// counts; ApplyPlan records a group's plan only if the group is unchanged
// since it was planned.
//
// The model and the state diagrams are in docs/architecture.md.
package ledger
