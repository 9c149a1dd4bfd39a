package paysync

import "fmt"

// The states and outcomes the ledger stores, as typed strings. The values
// are the ledger's TEXT columns (and its CHECK constraints) verbatim, and
// what `paysync batches --json` and friends print: never rename one. The
// state diagram, and which transitions the ledger makes, is in
// docs/architecture.md ("States").

// BatchState is where a batch (one create_pay_parts call's worth of pay
// parts for a company) is in delivery.
type BatchState string

// Batch states.
const (
	BatchPending   BatchState = "pending"   // committed, not yet sent
	BatchSending   BatchState = "sending"   // an attempt is (or was, at a crash) in flight
	BatchCreated   BatchState = "created"   // every item created or rejected
	BatchFailed    BatchState = "failed"    // retries exhausted; items stay pending
	BatchSplit     BatchState = "split"     // the API rejected it; its items moved to child batches
	BatchReverting BatchState = "reverting" // a revert is (or was) in progress
	BatchReverted  BatchState = "reverted"  // every created item deleted or gone
)

// PartState is where one pay part of a batch is.
type PartState string

// Pay part states.
const (
	PartPending  PartState = "pending"
	PartCreated  PartState = "created"
	PartRejected PartState = "rejected" // refused by the payroll API
	PartDeleted  PartState = "deleted"  // deleted by paysync
	PartGone     PartState = "gone"     // deleted in payroll by someone else
)

// EntryStatus is what became of a source's entry when it was imported.
type EntryStatus string

// Entry statuses.
const (
	EntryMapped   EntryStatus = "mapped"   // it has pay parts
	EntrySkipped  EntryStatus = "skipped"  // no pay part by the rules (the note says why)
	EntryRejected EntryStatus = "rejected" // a problem of the input
)

// SourceStatus is how far a source (a file, stdin, a message, a replay)
// got into the ledger.
type SourceStatus string

// Source statuses.
const (
	SourceReceived  SourceStatus = "received"
	SourceCommitted SourceStatus = "committed"
	SourceRejected  SourceStatus = "rejected" // refused as a whole: only its rejects are kept
)

// SourceKind is where a source came from.
type SourceKind string

// Source kinds.
const (
	SourceFile  SourceKind = "file"
	SourceStdin SourceKind = "stdin"
	SourceNATS  SourceKind = "nats"
	// SourceReplay is a replay of stored entries (its replay_of names the
	// import replayed): its batches hang off it.
	SourceReplay SourceKind = "replay"
)

// AttemptOp is the payroll call an attempt records.
type AttemptOp string

// Attempt operations.
const (
	AttemptCreate    AttemptOp = "create"    // create_pay_parts: the batch becomes sending
	AttemptDelete    AttemptOp = "delete"    // delete_pay_parts: the batch becomes reverting
	AttemptReconcile AttemptOp = "reconcile" // a read of the company's pay parts
)

// AttemptOutcome is how an attempt ended. Besides these, a reconcile
// records what it found (AttemptReconciled), and a delete the payroll
// error class of its failure.
type AttemptOutcome string

// Attempt outcomes.
const (
	AttemptInFlight    AttemptOutcome = "in_flight"   // not ended (yet)
	AttemptInterrupted AttemptOutcome = "interrupted" // the process stopped or died during the call
	AttemptOK          AttemptOutcome = "ok"
	AttemptNotApplied  AttemptOutcome = "not_applied" // certainly not executed
	AttemptAmbiguous   AttemptOutcome = "ambiguous"   // may have executed: reconciled next
	AttemptRevoked     AttemptOutcome = "revoked"     // the payroll connection was revoked
	AttemptRejected    AttemptOutcome = "rejected"    // the API refused an item (or the batch, which split)
	AttemptFailed      AttemptOutcome = "failed"      // the call could not be completed
)

// AttemptReconciled is the outcome of a reconcile that matched found of
// the batch's pending pay parts in payroll.
func AttemptReconciled(found, of int) AttemptOutcome {
	return AttemptOutcome(fmt.Sprintf("reconciled %d of %d", found, of))
}
