package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
)

// Payroll is what the worker needs from the payroll API (*payroll.Client).
type Payroll interface {
	CreatePayParts(ctx context.Context, companyID string, items []paysync.PayPartInput) ([]paysync.PayPart, error)
	DeletePayParts(ctx context.Context, companyID string, ids []string) (payroll.DeleteResult, error)
	PayParts(ctx context.Context, companyID string) ([]paysync.PayPart, error)
}

// Ledger is what delivery needs from the ledger (*ledger.Ledger).
type Ledger interface {
	Batch(ctx context.Context, id int64) (ledger.Batch, error)
	Items(ctx context.Context, batchID int64) ([]ledger.Item, error)
	OpenBatches(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
	BatchesInState(ctx context.Context, state paysync.BatchState) ([]ledger.Batch, error)
	BeginAttempt(ctx context.Context, batchID int64, op paysync.AttemptOp, items int) (int64, error)
	EndAttempt(ctx context.Context, attemptID int64, outcome paysync.AttemptOutcome, status int, msg string, state paysync.BatchState) error
	RecordCreated(ctx context.Context, batchID, attemptID int64, ids map[int64]string, outcome paysync.AttemptOutcome) error
	RecordCreatedThenBegin(ctx context.Context, batchID, attemptID int64, ids map[int64]string, outcome paysync.AttemptOutcome, nextBatch int64, nextItems int) (int64, error)
	RejectItems(ctx context.Context, batchID, attemptID int64, reasons map[int64]string) error
	SplitBatch(ctx context.Context, batchID, attemptID int64, msg string, groups [][]int64) ([]int64, error)
	SetBatchState(ctx context.Context, batchID int64, state paysync.BatchState, msg string) error
	AddForeign(ctx context.Context, company string, ids []string, snapshot bool) error
	Known(ctx context.Context, company string) (map[string]bool, error)
	Owned(ctx context.Context, company string) (map[string]bool, error)
	MarkRemoved(ctx context.Context, batchID, attemptID int64, deleted, gone []int64) error
	MarkSupersededRemoved(ctx context.Context, batchID, attemptID int64, deleted, gone []int64) error
	MarkDeleting(ctx context.Context, attemptID int64, itemIDs []int64) error
	InterruptAttempts(ctx context.Context) error
	SupersededBy(ctx context.Context, unit int64, company string) (map[int64][]ledger.Item, []int64, error)
	BeginSupersedeDelete(ctx context.Context, batchID int64, items int) (int64, error)
	FreezeUnit(ctx context.Context, unit int64) error
	KeepFrozen(ctx context.Context, ids []int64) error
}

var _ Ledger = (*ledger.Ledger)(nil)
var _ Payroll = (*payroll.Client)(nil)

// Stats counts what a Deliverer did.
type Stats struct {
	Created    int // pay parts created
	Rejected   int // pay parts the API refused
	Reconciled int // pay parts found created after an ambiguous outcome
	Deleted    int // pay parts deleted by a revert
	Gone       int // pay parts already deleted by someone else
	Attempts   int // create/delete calls
	Failed     int // batches that ran out of attempts (each once)
	// Waiting lists the companies whose batches a paused connection held
	// back (the pipeline's: revoked, or none serves them), sorted.
	Waiting []string
}

// Deliverer sends batches and reverts them, following the ledger-first rule.
type Deliverer struct {
	L           Ledger
	P           Payroll
	Log         *slog.Logger
	MaxAttempts int                                              // tries per batch before it is failed (default 8): not-applied answers, and ambiguous ones of which nothing was applied; see deliverBatch
	DeleteChunk int                                              // pay part ids per delete_pay_parts call (default 100)
	Sleep       func(ctx context.Context, d time.Duration) error // default: a timer that honours ctx
	OnProgress  func(created int)                                // called after each batch outcome
	// Limiter, when set, is waited on before every create and delete call
	// (a token bucket: PAYSYNC_RATE_LIMIT).
	Limiter interface {
		Wait(ctx context.Context) error
	}
	// OnBatch, when set, observes batch outcomes with their number of pay
	// parts, for metrics: "created", "reconciled", "split", "deleted",
	// "failed" (a batch ran out of attempts: counted when it becomes
	// failed, not again while it stays failed, retries and restarts
	// included) and "recovered" (a failed batch was created after all; 0
	// pay parts: they count as created).
	OnBatch func(outcome string, payParts int)
	// OnPayParts, when set, observes pay-part outcomes that are no batch's
	// outcome: "rejected" (refused by the API for good).
	OnPayParts func(outcome string, n int)
	// Now is the clock of failed batches' backoff (default time.Now).
	Now func() time.Time

	Stats       Stats
	failing     failing // batches this deliverer saw fail, and when each is due again
	snapshotted map[string]bool
	recovery    companySet // companies whose recovery waits for their connection (Recover)
	ahead       *readAhead // the next batch, read while a call is in flight
	begun       *begun     // the next batch, its attempt recorded with the last one's result
}

// begun is a batch whose create attempt was recorded in the transaction
// that recorded the batch before it (RecordCreatedThenBegin): it is sent
// next, without a transaction of its own first.
type begun struct {
	id, att int64
	b       ledger.Batch
	pending []ledger.Item
}

// beginNext readies the next batch to be begun with the last one's result:
// only when it was read ahead, is pending with items to send, its company's
// snapshot is taken, and the rate limit lets its call go. Otherwise nil,
// and it is read and begun on its own.
func (d *Deliverer) beginNext(ctx context.Context, next int64) *begun {
	ra := d.ahead
	if ra == nil || ra.id != next {
		return nil
	}
	<-ra.done
	// A correction's batch first deletes what its unit replaces.
	if ra.err != nil || ra.b.State != paysync.BatchPending || !d.snapshotted[ra.b.CompanyID] || ra.b.Correction != 0 {
		return nil
	}
	pending := pendingItems(ra.items)
	if len(pending) == 0 {
		return nil
	}
	if d.Limiter != nil {
		if err := d.Limiter.Wait(ctx); err != nil {
			return nil
		}
	}
	d.ahead = nil
	return &begun{id: next, b: ra.b, pending: pending}
}

// readAhead is a batch and its items read while the call before it was in
// flight: a sealed batch does not change until it is sent, and the call's
// 100 ms (or more) hides the reads.
type readAhead struct {
	id    int64
	done  chan struct{}
	b     ledger.Batch
	items []ledger.Item
	err   error
}

// readAheadOf starts reading batch id.
func (d *Deliverer) readAheadOf(ctx context.Context, id int64) {
	ra := &readAhead{id: id, done: make(chan struct{})}
	d.ahead = ra
	go func() {
		defer close(ra.done)
		if ra.b, ra.err = d.L.Batch(ctx, id); ra.err == nil {
			ra.items, ra.err = d.L.Items(ctx, id)
		}
	}()
}

// read returns batch id and its items: read ahead if they were, else now.
func (d *Deliverer) read(ctx context.Context, id int64) (ledger.Batch, []ledger.Item, error) {
	if ra := d.ahead; ra != nil {
		d.ahead = nil
		<-ra.done
		if ra.id == id && ra.err == nil {
			return ra.b, ra.items, nil
		}
	}
	b, err := d.L.Batch(ctx, id)
	if err != nil {
		return b, nil, err
	}
	switch b.State {
	case paysync.BatchCreated, paysync.BatchSplit, paysync.BatchReverting, paysync.BatchReverted, paysync.BatchSending:
		return b, nil, nil // not sent as it is: no items needed
	}
	items, err := d.L.Items(ctx, id)
	return b, items, err
}

// ErrRevoked stops all sending: the payroll connection was revoked.
var ErrRevoked = payroll.ErrRevoked

func (d *Deliverer) init() {
	if d.MaxAttempts <= 0 {
		d.MaxAttempts = 8
	}
	if d.DeleteChunk <= 0 {
		d.DeleteChunk = 100
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Sleep == nil {
		d.Sleep = sleepCtx
	}
	if d.snapshotted == nil {
		d.snapshotted = map[string]bool{}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// backoff is exponential with full jitter, 100ms·2^n capped at 10s, and
// never shorter than the server's Retry-After.
func backoff(attempt int, retryAfter time.Duration) time.Duration {
	ceil := min(100*time.Millisecond<<min(attempt, 7), 10*time.Second)
	d := time.Duration(rand.Int64N(int64(ceil))) + 20*time.Millisecond
	return max(d, retryAfter)
}

// A failed batch is tried again (one attempt) after failedBackoff: 30 s
// doubling per failed round up to 10 min, of which a random time in the
// upper half (15–30 s, …, 5–10 min: jitter, so that batches failed
// together are not retried together), and never before the server's
// Retry-After (capped at 15 min: a broken proxy must not park a batch for
// hours).
const (
	failedBackoffMin = 30 * time.Second
	failedBackoffMax = 10 * time.Minute
	maxRetryAfter    = 15 * time.Minute
)

func failedBackoff(round int, retryAfter time.Duration) time.Duration {
	ceil := min(failedBackoffMin<<min(round-1, 10), failedBackoffMax)
	d := ceil/2 + time.Duration(rand.Int64N(int64(ceil/2)+1))
	return max(d, min(retryAfter, maxRetryAfter))
}

// failing is the batches a Deliverer saw run out of attempts, with when
// each may be tried again. The pipeline's loop reads it while a company's
// worker writes it, hence the lock.
type failing struct {
	mu sync.Mutex
	m  map[int64]failedBatch
}

type failedBatch struct {
	rounds int       // rounds of attempts that failed
	due    time.Time // not tried again before
}

// fail records a failed round of batch id and returns how many rounds of
// it failed here.
func (f *failing) fail(id int64, now time.Time, retryAfter time.Duration) failedBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[int64]failedBatch{}
	}
	fb := f.m[id]
	fb.rounds++
	fb.due = now.Add(failedBackoff(fb.rounds, retryAfter))
	f.m[id] = fb
	return fb
}

func (f *failing) forget(id int64) (was bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, was = f.m[id]
	delete(f.m, id)
	return was
}

func (f *failing) get(id int64) (failedBatch, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fb, ok := f.m[id]
	return fb, ok
}

// waiting reports whether batch id failed here and its backoff runs.
func (f *failing) waiting(id int64, now time.Time) bool {
	fb, ok := f.get(id)
	return ok && now.Before(fb.due)
}

// next returns the earliest due time after now.
func (f *failing) next(now time.Time) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var at time.Time
	for _, fb := range f.m {
		if fb.due.After(now) && (at.IsZero() || fb.due.Before(at)) {
			at = fb.due
		}
	}
	return at, !at.IsZero()
}

// Recover finishes what a previous run left in flight: batches left
// sending are reconciled, reverts left half done are finished. It runs
// before any new work.
//
// A company whose payroll connection is paused (revoked, or none serves
// it: payroll.Router) does not hold up the others: its batches are left
// as they are, held, and the sending loop recovers them (resume) once its
// connection works again, before any new batch of it goes. With a single
// token nothing is held: a revoked one stops everything, as before.
func (d *Deliverer) Recover(ctx context.Context) error {
	d.init()
	// Attempts of a process that died stay in flight in the log: close them.
	if err := d.L.InterruptAttempts(ctx); err != nil {
		return err
	}
	sending, err := d.L.BatchesInState(ctx, paysync.BatchSending)
	if err != nil {
		return err
	}
	for _, b := range sending {
		if d.holds(ctx, b.CompanyID, nil) {
			continue
		}
		d.Log.Info("reconciling a batch left in flight", "batch", b.ID, "company", b.CompanyID)
		if err := d.reconcile(ctx, b.ID, b.CompanyID); err != nil && !d.holds(ctx, b.CompanyID, err) {
			return fmt.Errorf("recover batch %d: %w", b.ID, err)
		}
	}
	reverting, err := d.L.BatchesInState(ctx, paysync.BatchReverting)
	if err != nil {
		return err
	}
	for _, b := range reverting {
		if d.holds(ctx, b.CompanyID, nil) {
			continue
		}
		d.Log.Info("finishing a revert left half done", "batch", b.ID)
		if err := d.revertBatch(ctx, b.ID); err != nil && !d.holds(ctx, b.CompanyID, err) {
			return fmt.Errorf("recover revert of batch %d: %w", b.ID, err)
		}
	}
	return nil
}

// companySet is the companies whose recovery waits for their connection.
// The pipeline's company workers read it beside each other, hence the lock.
type companySet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (h *companySet) add(company string) (added bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]bool{}
	}
	added = !h.m[company]
	h.m[company] = true
	return added
}

func (h *companySet) has(company string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[company]
}

func (h *companySet) drop(company string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, company)
}

func (h *companySet) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.m))
}

// holds reports whether recovery leaves company's batches for later: it
// is held already, or its connection is paused — before a call (err nil),
// or after one refused as revoked (err). The first hold is logged.
func (d *Deliverer) holds(ctx context.Context, company string, err error) bool {
	if d.recovery.has(company) {
		return true
	}
	if err != nil && !errors.Is(err, ErrRevoked) {
		return false
	}
	why := PausedFor(ctx, d.P, company)
	if why == nil {
		return false
	}
	if d.recovery.add(company) {
		d.Log.Warn("recovery of a company waits for its payroll connection: its batches left in flight are settled once it is connected again, before any new batch of it goes; the other companies go on",
			"company", company, "reason", why.Error())
	}
	return true
}

// RecoveryWaits lists the companies whose batches left in flight Recover
// left for later (their connection paused), sorted.
func (d *Deliverer) RecoveryWaits() []string { return d.recovery.list() }

// resume settles what Recover left of company (its connection was paused
// then), on behalf of template t, once its connection works: its batches
// left sending are reconciled, its reverts left half done finished. The
// pipeline calls it before the company's first batch goes.
func (d *Deliverer) resume(ctx context.Context, t *Deliverer, company string) error {
	if t == nil || !t.recovery.has(company) {
		return nil
	}
	d.init()
	for _, st := range []paysync.BatchState{paysync.BatchSending, paysync.BatchReverting} {
		bs, err := d.L.BatchesInState(ctx, st)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if b.CompanyID != company {
				continue
			}
			if st == paysync.BatchSending {
				d.Log.Info("reconciling a batch left in flight", "batch", b.ID, "company", company)
				err = d.reconcile(ctx, b.ID, company)
			} else {
				d.Log.Info("finishing a revert left half done", "batch", b.ID, "company", company)
				err = d.revertBatch(ctx, b.ID)
			}
			if err != nil {
				return fmt.Errorf("recover batch %d: %w", b.ID, err)
			}
		}
	}
	t.recovery.drop(company)
	d.Log.Info("recovery of a company done: its connection works again", "company", company)
	return nil
}

// PausedFor says why company's calls wait for its connection
// (payroll.Router.Paused); nil: they go, as always with a single token.
func PausedFor(ctx context.Context, p Payroll, company string) error {
	if g, ok := p.(*callGate); ok {
		p = g.Payroll
	}
	if cp, ok := p.(companyPauser); ok {
		return cp.Paused(ctx, company)
	}
	return nil
}

// Deliver sends the given batches (and the batches they split into) in
// order. It stops at the first revocation or context end; other failures
// leave a batch failed and go on with the next. It tries every batch it is
// given, failed ones included: when to try a failed batch again is the
// caller's choice (the pipeline waits for its backoff).
func (d *Deliverer) Deliver(ctx context.Context, batchIDs []int64) error {
	d.init()
	queue := append([]int64(nil), batchIDs...)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		var next int64
		if len(queue) > 0 {
			next = queue[0]
		}
		children, err := d.deliverBatch(ctx, id, next)
		if err != nil {
			return err
		}
		queue = append(children, queue...)
	}
	return nil
}

// retryDue reports whether batch id may be sent now: false while a
// failed batch's backoff runs (it failed here, and its next try is later).
// The pipeline's loop calls it beside the company's worker: it reads only
// the lock-guarded failing set.
func (d *Deliverer) retryDue(id int64) bool {
	return !d.failing.waiting(id, d.now())
}

// nextRetry returns when the first failed batch whose backoff runs is due.
func (d *Deliverer) nextRetry() (time.Time, bool) {
	return d.failing.next(d.now())
}

func (d *Deliverer) now() time.Time {
	if d.Now == nil {
		return time.Now()
	}
	return d.Now()
}

// prepare gets ready to send to company: its snapshot, once per run.
func (d *Deliverer) prepare(ctx context.Context, company string) error {
	d.init()
	return d.ensureSnapshot(ctx, company)
}

// ensureSnapshot records the company's existing pay parts as foreign before
// the first send of this run. Never while one of its batches is unreconciled.
func (d *Deliverer) ensureSnapshot(ctx context.Context, company string) error {
	if d.snapshotted[company] {
		return nil
	}
	sending, err := d.L.BatchesInState(ctx, paysync.BatchSending)
	if err != nil {
		return err
	}
	for _, b := range sending {
		if b.CompanyID == company {
			if err := d.reconcile(ctx, b.ID, company); err != nil {
				return err
			}
		}
	}
	current, err := d.P.PayParts(ctx, company)
	if err != nil {
		return fmt.Errorf("read pay parts of company %s before sending: %w", company, err)
	}
	owned, err := d.L.Owned(ctx, company)
	if err != nil {
		return err
	}
	var foreign []string
	for _, p := range current {
		if !owned[p.ID] {
			foreign = append(foreign, p.ID)
		}
	}
	if err := d.L.AddForeign(ctx, company, foreign, true); err != nil {
		return err
	}
	d.snapshotted[company] = true
	return nil
}

func pendingItems(items []ledger.Item) []ledger.Item {
	var out []ledger.Item
	for _, it := range items {
		if it.State == paysync.PartPending {
			out = append(out, it)
		}
	}
	return out
}

// deliverBatch sends one batch until every item is created or rejected,
// the batch fails, or it splits (the children are returned). next, when
// not 0, is the batch to send after it: read while this one's call is in
// flight.
//
// A round of a batch ends failed after MaxAttempts tries: not-applied
// answers, and ambiguous ones that reconciliation shows were not applied
// (a 5xx before executing looks the same as one after). Only those count,
// each followed by a backoff that honours Retry-After: an ambiguous answer
// of which something was applied is progress (the rest is sent again,
// after the server's Retry-After if it gave one), and a revoked one stops
// everything and leaves the batch as it was. They count only in this
// round: a new run tries a failed batch again with a full round.
// A batch this deliverer saw fail gets one attempt a round: the pipeline
// spaces those rounds (failedBackoff).
func (d *Deliverer) deliverBatch(ctx context.Context, id, next int64) (children []int64, err error) {
	var (
		company   string
		tries     int // tries in this round (see above)
		limit     = d.MaxAttempts
		wasFailed bool               // the batch was failed when the round began
		end       paysync.BatchState // its state when the round ended (no error)
		first     = true
	)
	if _, ok := d.failing.get(id); ok {
		limit = 1
	}
	defer func() {
		if err == nil && end != "" {
			d.settled(id, company, end, wasFailed)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var b ledger.Batch
		var pending []ledger.Item
		var att int64
		if bg := d.begun; bg != nil {
			// Begun with the last batch's result. Another batch than the one
			// begun (not expected) leaves that one sending: reconciled
			// before it is sent, as after a crash.
			d.begun = nil
			if bg.id == id {
				b, pending, att = bg.b, bg.pending, bg.att
			}
		}
		if att == 0 {
			var items []ledger.Item
			var err error
			b, items, err = d.read(ctx, id)
			if err != nil {
				return nil, err
			}
			if first {
				wasFailed = b.State == paysync.BatchFailed
			}
			first, company = false, b.CompanyID
			switch b.State {
			case paysync.BatchCreated, paysync.BatchSplit, paysync.BatchReverting, paysync.BatchReverted:
				end = b.State
				return nil, nil
			case paysync.BatchSending:
				if err := d.reconcile(ctx, id, b.CompanyID); err != nil {
					return nil, err
				}
				continue
			}
			if b.Correction != 0 {
				// What the correction replaces leaves payroll first.
				if err := d.removeSuperseded(ctx, b.Correction, b.CompanyID); err != nil {
					return nil, err
				}
			}
			pending = pendingItems(items)
			if len(pending) == 0 {
				end = paysync.BatchCreated
				return nil, d.L.RecordCreated(ctx, id, 0, nil, "")
			}
			// A failed batch stays failed until an attempt begins (the
			// attempt makes it sending).
			if err := d.ensureSnapshot(ctx, b.CompanyID); err != nil {
				return nil, err
			}
			if d.Limiter != nil {
				if err := d.Limiter.Wait(ctx); err != nil {
					return nil, err
				}
			}
			if att, err = d.L.BeginAttempt(ctx, id, paysync.AttemptCreate, len(pending)); errors.Is(err, ledger.ErrBatchChanged) {
				continue // a correction took a pay part out: read it again
			} else if err != nil {
				return nil, err
			}
		}
		first, company = false, b.CompanyID
		inputs := make([]paysync.PayPartInput, len(pending))
		for i, it := range pending {
			inputs[i] = it.PayPartInput
		}
		d.Stats.Attempts++
		if next != 0 {
			d.readAheadOf(ctx, next)
		}
		sent := time.Now()
		created, err := d.P.CreatePayParts(ctx, b.CompanyID, inputs)
		took := time.Since(sent)
		if err == nil {
			ids := make(map[int64]string, len(created))
			for i, p := range created {
				ids[pending[i].ID] = p.ID
			}
			done := len(created) == len(pending)
			var bg *begun
			if done && next != 0 {
				bg = d.beginNext(ctx, next)
			}
			if bg != nil {
				if bg.att, err = d.L.RecordCreatedThenBegin(ctx, id, att, ids, paysync.AttemptOK, bg.id, len(bg.pending)); err != nil {
					return nil, err
				}
				if bg.att != 0 {
					d.begun = bg
				}
			} else if err := d.L.RecordCreated(ctx, id, att, ids, paysync.AttemptOK); err != nil {
				return nil, err
			}
			d.Stats.Created += len(created)
			d.observe("created", len(created))
			d.progress()
			// One line per batch created, never one per pay part.
			d.Log.Info("batch created", "company", b.CompanyID, "batch", id, "pay_parts", len(created), "took", took)
			if done {
				end = paysync.BatchCreated
				return nil, nil // every item created: the batch is created
			}
			continue
		}
		var pe *payroll.Error
		if !errors.As(err, &pe) {
			// The context ended (or something unexpected): the request may
			// have gone out. Leave the batch sending: the next run reconciles.
			_ = d.L.EndAttempt(context.WithoutCancel(ctx), att, paysync.AttemptInterrupted, 0, err.Error(), "")
			return nil, err
		}
		msg := pe.Error()
		switch pe.Class {
		case paysync.NotApplied:
			tries++
			state := paysync.BatchPending
			if tries >= limit {
				state = paysync.BatchFailed
			}
			if err := d.L.EndAttempt(ctx, att, paysync.AttemptNotApplied, pe.StatusCode, msg, state); err != nil {
				return nil, err
			}
			if state == paysync.BatchFailed {
				d.failed(b, len(pending), tries, wasFailed, pe)
				return nil, nil
			}
			if err := d.Sleep(ctx, backoff(tries-1, pe.RetryAfter)); err != nil {
				return nil, err
			}
		case paysync.Rejected:
			switch {
			case pe.Index >= 0 && pe.Index < len(pending):
				if err := d.reject(ctx, b, att, pending[pe.Index], pe.Reason); err != nil {
					return nil, err
				}
			case len(pending) == 1:
				if err := d.reject(ctx, b, att, pending[0], pe.Reason); err != nil {
					return nil, err
				}
			default:
				// The server did not say which item: isolate it by halves.
				half := len(pending) / 2
				var a, c []int64
				for i, it := range pending {
					if i < half {
						a = append(a, it.ID)
					} else {
						c = append(c, it.ID)
					}
				}
				d.Log.Debug("batch refused without naming the pay part: splitting it in halves to find it", "batch", id, "pay_parts", len(pending), "reason", pe.Reason)
				d.observe("split", len(pending))
				children, err := d.L.SplitBatch(ctx, id, att, msg, [][]int64{a, c})
				if err == nil {
					end = paysync.BatchSplit
				}
				return children, err
			}
		case paysync.Ambiguous:
			if err := d.L.EndAttempt(ctx, att, paysync.AttemptAmbiguous, pe.StatusCode, msg, ""); err != nil {
				return nil, err
			}
			// Whether it executed is known only once payroll is read:
			// never sent again before. If nothing of it was applied, the
			// answer was a refusal in effect: a try, with the backoff of a
			// not-applied one, else a server answering 5xx without
			// executing is called again at once, for ever.
			unapplied := paysync.BatchPending
			if tries+1 >= limit {
				unapplied = paysync.BatchFailed
			}
			found, left, err := d.match(ctx, id, b.CompanyID, unapplied, msg)
			if err != nil {
				return nil, err
			}
			if found > 0 {
				d.Log.Debug("ambiguous answer: some pay parts were created", "batch", id, "found", found, "pending", left, "err", msg)
				if pe.RetryAfter > 0 && left > 0 {
					if err := d.Sleep(ctx, pe.RetryAfter); err != nil {
						return nil, err
					}
				}
				continue
			}
			tries++
			if unapplied == paysync.BatchFailed {
				d.failed(b, len(pending), tries, wasFailed, pe)
				return nil, nil
			}
			d.Log.Debug("ambiguous answer: nothing was created; trying again", "batch", id, "tries", tries, "err", msg)
			if err := d.Sleep(ctx, backoff(tries-1, pe.RetryAfter)); err != nil {
				return nil, err
			}
		case paysync.Revoked:
			// Not the batch's fault: it stays as it was (pending, or failed),
			// and the attempt counts towards nothing.
			state := paysync.BatchPending
			if wasFailed {
				state = paysync.BatchFailed
			}
			if err := d.L.EndAttempt(ctx, att, paysync.AttemptRevoked, 0, msg, state); err != nil {
				return nil, err
			}
			return nil, err
		}
	}
}

// failed reports a round of batch b that ran out of attempts: said and
// counted once, when the batch becomes failed; a failed batch failing
// again is no news (debug), except once per run for one failed by an
// earlier run (info). The pipeline tries it again after its backoff.
func (d *Deliverer) failed(b ledger.Batch, payParts, tries int, wasFailed bool, pe *payroll.Error) {
	fb := d.failing.fail(b.ID, d.now(), pe.RetryAfter)
	if fb.rounds == 1 {
		d.Stats.Failed++
	}
	args := []any{"batch", b.ID, "company", b.CompanyID, "pay_parts", payParts, "attempts", tries, "err", pe.Error()}
	switch {
	case !wasFailed:
		d.observe("failed", payParts)
		d.Log.Warn("batch failed", args...)
	case fb.rounds == 1:
		d.Log.Info("batch still failed", args...)
	default:
		d.Log.Debug("batch still failed", args...)
	}
}

// settled notes how a round of batch id ended: a failed batch that is now
// created has recovered (said and counted once); one that split or was
// reverted is no longer this deliverer's to retry.
func (d *Deliverer) settled(id int64, company string, state paysync.BatchState, wasFailed bool) {
	if state == paysync.BatchFailed {
		return
	}
	known := d.failing.forget(id)
	if state == paysync.BatchCreated && (wasFailed || known) {
		d.observe("recovered", 0)
		d.Log.Info("batch recovered", "batch", id, "company", company)
	}
}

// reject records that the API refused item of batch b for good: a reject
// of its entries, a warning naming it (employee and code, the server's
// reason, which is secret-free), and the rejected count.
func (d *Deliverer) reject(ctx context.Context, b ledger.Batch, att int64, item ledger.Item, reason string) error {
	if err := d.L.RejectItems(ctx, b.ID, att, map[int64]string{item.ID: reason}); err != nil {
		return err
	}
	d.Stats.Rejected++
	if d.OnPayParts != nil {
		d.OnPayParts("rejected", 1)
	}
	d.Log.Warn("pay part rejected by the payroll API", "batch", b.ID, "import", b.SourceID, "company", b.CompanyID,
		"pay_part", item.ID, "employee_id", item.EmployeeID, "code", item.Code, "reason", reason)
	return nil
}

func (d *Deliverer) observe(outcome string, n int) {
	if d.OnBatch != nil {
		d.OnBatch(outcome, n)
	}
}

func (d *Deliverer) progress() {
	if d.OnProgress != nil {
		d.OnProgress(d.Stats.Created)
	}
}

// reconcile settles a batch whose last create may or may not have executed:
// each pending item is matched to a distinct pay part of the company that
// is neither ours already nor foreign. The batch leaves sending only when
// the read succeeded. It is said once per batch (a batch left in flight);
// deliverBatch settles its ambiguous answers with match.
func (d *Deliverer) reconcile(ctx context.Context, id int64, company string) error {
	found, left, err := d.match(ctx, id, company, "", "")
	if err != nil {
		return err
	}
	d.Log.Info("reconciled", "batch", id, "found", found, "pending", left)
	return nil
}

// match reconciles batch id (see reconcile) and returns how many of its
// pending items it found created and how many are left pending. When it
// finds none and unapplied is not empty, the batch becomes unapplied
// (pending, or failed), lastErr its last error.
func (d *Deliverer) match(ctx context.Context, id int64, company string, unapplied paysync.BatchState, lastErr string) (found, left int, err error) {
	items, err := d.L.Items(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	pending := pendingItems(items)
	att, err := d.L.BeginAttempt(ctx, id, paysync.AttemptReconcile, len(pending))
	if err != nil {
		return 0, 0, err
	}
	var current []paysync.PayPart
	for try := 0; ; try++ {
		current, err = d.P.PayParts(ctx, company)
		if err == nil {
			break
		}
		if errors.Is(err, payroll.ErrRevoked) || try >= d.MaxAttempts || ctx.Err() != nil {
			_ = d.L.EndAttempt(context.WithoutCancel(ctx), att, paysync.AttemptFailed, 0, err.Error(), "")
			return 0, 0, fmt.Errorf("reconcile batch %d: read pay parts of company %s: %w", id, company, err)
		}
		var pe *payroll.Error
		var ra time.Duration
		if errors.As(err, &pe) {
			ra = pe.RetryAfter
		}
		if err := d.Sleep(ctx, backoff(try, ra)); err != nil {
			return 0, 0, err
		}
	}
	known, err := d.L.Known(ctx, company)
	if err != nil {
		return 0, 0, err
	}
	used := map[string]bool{}
	ids := map[int64]string{}
	for _, it := range pending {
		for _, p := range current {
			if known[p.ID] || used[p.ID] || !p.Matches(it.PayPartInput) {
				continue
			}
			ids[it.ID], used[p.ID] = p.ID, true
			break
		}
	}
	outcome := paysync.AttemptReconciled(len(ids), len(pending))
	if len(ids) == 0 && len(pending) > 0 && unapplied != "" {
		// Nothing to record: the attempt's end moves the batch.
		if err := d.L.EndAttempt(ctx, att, outcome, 0, lastErr, unapplied); err != nil {
			return 0, 0, err
		}
	} else if err := d.L.RecordCreated(ctx, id, att, ids, outcome); err != nil {
		return 0, 0, err
	}
	d.Stats.Reconciled += len(ids)
	d.Stats.Created += len(ids)
	d.observe("reconciled", len(ids))
	d.progress()
	return len(ids), len(pending) - len(ids), nil
}
