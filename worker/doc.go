// Package worker is paysync's pipeline: intake commits what an input
// means to the ledger (entries held), the one Reconciler plans what
// payroll must hold for the groups that changed and records it ledger
// first, and the Deliverer sends it exactly once, deletes before creates.
// Operations (revert is undo, replay is redo) change what counts and
// reconcile; the CLI, the console and the daemon all use them.
//
// The delivery rule ("ledger first"): an attempt is recorded (batch →
// sending, or the pay parts a delete is about to remove) before the
// payroll call, and its result is stored in one transaction with the
// batch's new state. The payroll client classifies failures: not applied
// (retried with backoff, honouring Retry-After, then the batch is failed
// and tried again later), rejected (the offending item isolated, the rest
// created), ambiguous (the batch stays sending until reconciled against
// the company's pay parts, never claiming one recorded as foreign), and
// revoked (sending stops; everything stays pending).
//
// Daemon puts the parts of `paysync run` in their order (start-up reads,
// sources, Recover, the sending Pipeline; on stop intake first, then a
// last flush); Begin is the same start for a command.
//
// The model, the operations and the state diagrams are in
// docs/architecture.md.
package worker
