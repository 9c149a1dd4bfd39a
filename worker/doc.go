// Package worker is paysync's pipeline: it commits what an import means to
// the ledger before anything is sent, delivers batches to the payroll API
// exactly once, and reverts and replays them.
//
// The delivery rule ("ledger first"): intent is committed (source, entries,
// pending pay parts in batches) before any call; an attempt is recorded
// (batch → sending) before create_pay_parts is called; the returned ids are
// stored in one transaction with the batch's new state. Failures are
// classified by the payroll client:
//
//   - not applied: retried with exponential backoff and jitter, honouring
//     Retry-After, at most MaxAttempts times per try (revoked attempts don't
//     count; an ambiguous one that reconciliation shows was not applied
//     counts, with the same backoff); then the batch is failed: its pay parts stay
//     pending, the next run tries it again, and the daemon's Pipeline does
//     so itself after a backoff (failedBackoff);
//   - rejected: the offending item (or, when the server does not say which,
//     each half of the batch) is isolated so that the good items are still
//     created;
//   - ambiguous: the batch stays sending until it is reconciled: the
//     company's pay parts are read and each pending item is matched to a
//     distinct pay part that is neither ours already nor recorded as
//     foreign. Foreign pay parts are recorded by a snapshot taken before
//     the first send to a company (and never while one of its batches is
//     unreconciled), so a pay part that existed before the attempt is never
//     claimed. Only the unmatched items are sent again (after the server's
//     Retry-After, if it gave one);
//   - revoked: sending stops at once, everything stays pending.
//
// Corrections (Corrector) are applied before delivery: a correction unit's
// batch first deletes the pay parts the unit replaces (the revert's delete
// step, ledger first), then creates its own; a command applies what an
// earlier run recorded and did not apply before it delivers.
//
// On start (Recover), batches left sending are reconciled and reverts left
// half done are finished before any new work. Daemon puts the parts of
// `paysync run` in their order (start-up reads, sources, recovery, the
// sending Pipeline; on stop intake first, then a last flush); Begin is the
// same start for a command that sends once.
//
// Limits: a pay part created by someone else after the snapshot that is
// identical to one of ours (same employee, code and numbers) could be
// claimed by a reconciliation. The count in payroll is right either way;
// only which of two identical pay parts a later revert deletes can differ.
package worker
