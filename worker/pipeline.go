package worker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll"
)

// PipelineLedger is what the sending loop needs beyond delivery.
type PipelineLedger interface {
	SealDueAny(ctx context.Context, linger time.Duration) (bool, error)
	SealDue(ctx context.Context, linger time.Duration) error
	OpenHeads(ctx context.Context) (map[string]int64, error)
	OpenAfter(ctx context.Context, company string, from int64, limit int) ([]int64, error)
	Lingering(ctx context.Context) (map[string]time.Time, error)
}

var _ PipelineLedger = (*ledger.Ledger)(nil)

// Pipeline is the daemon's sending loop: it seals open batches that are
// full or have lingered, and delivers every sealed open batch, oldest
// first (so a company's batches keep their order). Sources only commit to
// the ledger; they never wait for the payroll API.
//
// Each company with work gets its own worker (one per company, up to
// twice InFlight at once): it sends the company's batches one after the
// other, so their order is kept, and keeps taking those sealed meanwhile.
// InFlight bounds the calls on the wire, not the workers: a call holds its
// slot only while it is out, so while one company records its last result
// and begins its next batch, another company's call uses the slot.
//
// A batch that ran out of attempts (failed) is not tried again at once: a
// worker passes over it until its backoff has run (capped exponential with
// jitter, never before the server's Retry-After; see failedBackoff), then
// gives it one attempt. The company's other batches go on meanwhile.
type Pipeline struct {
	L        PipelineLedger
	D        *Deliverer    // the template: each company gets its own copy
	Linger   time.Duration // how long a part-full batch waits for more (PAYSYNC_BATCH_LINGER)
	Tick     time.Duration // how often to look (default Linger/4, at least 20ms)
	InFlight int           // payroll calls in flight at once (default 4); one at a time per company
	Log      *slog.Logger
	Now      func() time.Time // the clock of failed batches' backoff (default time.Now)
	// Correct applies the corrections intake recorded (Corrector.Run)
	// before each look: their batches are then sent like any other.
	Correct func(ctx context.Context) (int, error)
	corrErr string // the last failure of Correct, logged once
	// CutoffAt, with Cutoff, runs Cutoff at its times (PAYSYNC_SEND=cutoff:
	// the held entries planned into their periods' pay parts); a failure
	// is tried again after cutoffRetry.
	CutoffAt  Schedule
	Cutoff    func(ctx context.Context) error
	nextCut   time.Time
	cutFailed bool
	// Merge plans the entries intake held into their aggregates
	// (PAYSYNC_SEND=immediate with aggregation: Corrector.Merge); more
	// says held entries are left (a chunk, or a unit busy). Debounced:
	// see merge. Held tells the pipeline that intake held entries.
	Merge func(ctx context.Context) (more bool, err error)
	// HeldFull is how many held entries make a merge due at once, without
	// waiting the linger (a batch's size: 0, always the linger).
	HeldFull int
	mg       mergeState

	revoked atomic.Bool
	wake    chan struct{}
	stop    chan struct{}
	once    sync.Once
	sem     chan struct{} // company workers draining at once: 2 × InFlight
	gate    *callGate     // the calls in flight, shared by the company workers
	workers sync.WaitGroup

	mu    sync.Mutex
	perC  map[string]*Deliverer
	busy  map[string]bool // companies with a worker running
	again map[string]bool // companies a look passed over because their worker ran
	errs  []error         // workers' failures since the last look
	// waiting is the companies passed over because their connection is
	// paused (payroll.Router), until one of their workers ends well.
	waiting map[string]bool
	// failures counts the failed looks since delivery last worked: the
	// loop's pause grows with it, and only the first is a warning.
	failures int
	failKind string // what they are: "revoked" or "failed"
}

// Stats sums what the per-company deliverers did.
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s Stats
	for _, d := range p.perC {
		s.Created += d.Stats.Created
		s.Rejected += d.Stats.Rejected
		s.Reconciled += d.Stats.Reconciled
		s.Deleted += d.Stats.Deleted
		s.Gone += d.Stats.Gone
		s.Attempts += d.Stats.Attempts
		s.Failed += d.Stats.Failed
	}
	for c := range p.waiting {
		s.Waiting = append(s.Waiting, c)
	}
	slices.Sort(s.Waiting)
	return s
}

// deliverer returns the company's deliverer (its snapshot state lives there).
func (p *Pipeline) deliverer(company string) *Deliverer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perC == nil {
		p.perC = map[string]*Deliverer{}
	}
	d := p.perC[company]
	if d == nil {
		d = &Deliverer{L: p.D.L, P: p.gate, Log: p.D.Log, MaxAttempts: p.D.MaxAttempts, DeleteChunk: p.D.DeleteChunk,
			Sleep: p.D.Sleep, Limiter: p.D.Limiter, OnBatch: p.D.OnBatch, OnPayParts: p.D.OnPayParts, Now: p.Now}
		p.perC[company] = d
	}
	return d
}

// Revoked reports whether the last delivery stopped on a revoked token.
func (p *Pipeline) Revoked() bool { return p.revoked.Load() }

// Wake asks for a look now (a source committed something).
func (p *Pipeline) Wake() {
	if p.wake == nil {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Init prepares the pipeline; call before Run and Wake.
func (p *Pipeline) Init() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Tick <= 0 {
		p.Tick = max(p.Linger/4, 20*time.Millisecond)
	}
	if p.InFlight <= 0 {
		p.InFlight = 4
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
	if p.stop == nil {
		p.stop = make(chan struct{})
	}
	if p.sem == nil {
		p.sem = make(chan struct{}, 2*p.InFlight)
	}
	if p.gate == nil {
		p.gate = newCallGate(p.D.P, p.InFlight)
	}
	if p.busy == nil {
		p.busy = map[string]bool{}
	}
	if p.again == nil {
		p.again = map[string]bool{}
	}
}

// Stop asks Run to return once its workers have finished the batch they
// are sending: a call in flight is finished, not cut (cancel Run's context
// for that).
func (p *Pipeline) Stop() {
	p.Init()
	p.once.Do(func() { close(p.stop) })
}

// Run loops until ctx ends or Stop. Failures are retried on a later look,
// after a pause that doubles from 1 s to 30 s while they last and is never
// shorter than the server's Retry-After; a revoked token pauses sending
// (everything stays pending) and is retried every 30 s, so that a
// re-connected account resumes by itself. A run of failures is logged
// once when it begins (and when its kind changes), and once when delivery
// works again.
func (p *Pipeline) Run(ctx context.Context) error {
	p.Init()
	defer p.workers.Wait()
	// A look happens on a wake (a source committed, a worker finished),
	// when the oldest open batch has lingered (so that a lone entry waits
	// linger, not linger plus a tick), and every Tick regardless.
	t := time.NewTimer(p.Tick)
	defer t.Stop()
	var pauseUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.stop:
			return nil
		case <-t.C:
		case <-p.wake:
		}
		next := p.Tick
		if time.Now().Before(pauseUntil) {
			resetTimer(t, time.Until(pauseUntil))
			continue
		}
		p.correct(ctx)
		p.cutoff(ctx)
		p.merge(ctx)
		open, err := p.look(ctx, p.Linger)
		if err == nil {
			err = p.takeErrs()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			pauseUntil = time.Now().Add(p.failedLook(err))
			resetTimer(t, time.Until(pauseUntil))
			continue
		}
		p.revoked.Store(false)
		if open == 0 {
			p.endFailures() // nothing left to fail
		}
		// The first failed batch whose backoff ends is due then.
		if at, ok := p.nextRetry(); ok {
			next = min(next, max(at.Sub(p.Now()), 0))
		}
		if lingering, err := p.L.Lingering(ctx); err == nil {
			for company, at := range lingering {
				next = min(next, max(time.Until(at.Add(p.Linger)), 0))
				if p.isBusy(company) || p.paused(ctx, company) {
					continue
				}
				// While its batch lingers, take the company's snapshot (one
				// read per company and run), so that sending it is one call.
				if err := p.deliverer(company).prepare(ctx, company); err != nil {
					// Sending will need it too, and say so then; until
					// then, look less often.
					p.Log.Debug("reading pay parts before sending", "company", company, "err", err)
					next = max(next, time.Second)
					break
				}
			}
		}
		if !p.nextCut.IsZero() {
			next = min(next, max(time.Until(p.nextCut), 0))
		}
		if at := p.mergeAt(); !at.IsZero() {
			next = min(next, max(time.Until(at), 0))
		}
		resetTimer(t, next)
	}
}

// Schedule is when something recurs (a cron schedule).
type Schedule interface{ Next(time.Time) time.Time }

// cutoffRetry is how soon a failed cutoff is tried again.
const cutoffRetry = 30 * time.Second

// cutoff runs Cutoff when its time has come.
func (p *Pipeline) cutoff(ctx context.Context) {
	if p.CutoffAt == nil || p.Cutoff == nil {
		return
	}
	now := p.Now()
	if p.nextCut.IsZero() {
		p.nextCut = p.CutoffAt.Next(now)
		p.Log.Info("entries are held until the cutoff", "next_cutoff", p.nextCut.Format(time.RFC3339))
		return
	}
	if now.Before(p.nextCut) {
		return
	}
	if err := p.Cutoff(ctx); err != nil {
		if ctx.Err() == nil {
			if !p.cutFailed {
				p.Log.Warn("cutoff failed; retrying", "err", err, "retry_in", cutoffRetry)
			}
			p.cutFailed, p.nextCut = true, now.Add(cutoffRetry)
		}
		return
	}
	p.cutFailed, p.nextCut = false, p.CutoffAt.Next(now)
	p.Log.Info("cutoff done", "next_cutoff", p.nextCut.Format(time.RFC3339))
}

// mergeState is the merge's debounce (Pipeline.merge).
type mergeState struct {
	heldSince time.Time     // the first entry held since the last merge (zero: none); under Pipeline.mu
	held      int           // entries held since the last merge; under Pipeline.mu
	end       time.Time     // when the last merge ended
	took      time.Duration // how long it took
	retryAt   time.Time     // a failed merge's backoff
	backlog   bool          // the last merge left more held than it takes
	failures  int
	errText   string // the last failure, logged once
}

// Held tells the pipeline that intake held n entries for a merge (and the
// daemon, at start, that an earlier run may have left some: n 0).
func (p *Pipeline) Held(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mg.heldSince.IsZero() {
		p.mg.heldSince = time.Now()
	}
	p.mg.held += n
}

// mergeAt is when the next merge is due (zero: nothing held).
func (p *Pipeline) mergeAt() time.Time {
	if p.Merge == nil {
		return time.Time{}
	}
	p.mu.Lock()
	since, held := p.mg.heldSince, p.mg.held
	p.mu.Unlock()
	if since.IsZero() {
		return time.Time{}
	}
	// Enough held to fill a batch: no reason to wait the linger.
	full := p.HeldFull > 0 && held >= p.HeldFull
	return mergeDue(since, p.Linger, p.mg.end, p.mg.took, p.mg.retryAt, p.mg.backlog || full)
}

// mergeDue is when a merge may run: not sooner than linger after the first
// entry held since the last merge (replacing an aggregate costs a delete
// and a create, so entries arriving together are merged together) unless
// the last merge left a backlog (more held than one merge takes: they are
// all there already), not sooner than the last merge's duration after it
// ended (merges then take at most half the loop's time, sending the other
// half, and each takes what arrived meanwhile), and not before a failed
// merge's backoff.
func mergeDue(heldSince time.Time, linger time.Duration, lastEnd time.Time, lastTook time.Duration, retryAt time.Time, backlog bool) time.Time {
	due := heldSince.Add(linger)
	if backlog {
		due = heldSince
	}
	if t := lastEnd.Add(lastTook); t.After(due) {
		due = t
	}
	if retryAt.After(due) {
		due = retryAt
	}
	return due
}

// mergeRetryMax caps a failing merge's backoff.
const mergeRetryMax = 30 * time.Second

// merge runs Merge when it is due. A failure (payroll or the ledger,
// transient) is retried with a backoff that doubles from 1 s to 30 s,
// logged once; nothing is rejected for it: the entries stay held in the
// ledger (a stop leaves them there too, for the next run).
func (p *Pipeline) merge(ctx context.Context) {
	at := p.mergeAt()
	if at.IsZero() || time.Now().Before(at) {
		return
	}
	p.mu.Lock()
	p.mg.heldSince, p.mg.held = time.Time{}, 0 // entries held from now on are the next merge's
	p.mu.Unlock()
	start := time.Now()
	more, err := p.Merge(ctx)
	end := time.Now()
	p.mg.end, p.mg.took = end, end.Sub(start)
	switch {
	case err != nil && ctx.Err() != nil:
		return // stopping
	case err != nil:
		p.mg.failures++
		wait := min(time.Second<<min(p.mg.failures-1, 5), mergeRetryMax)
		p.mg.retryAt = end.Add(wait)
		if err.Error() != p.mg.errText {
			p.Log.Warn("merging held entries failed; retrying", "err", err, "retry_in", wait.String())
			p.mg.errText = err.Error()
		}
		p.Held(0)
		return
	case p.mg.failures > 0:
		p.Log.Info("merging held entries works again", "failures", p.mg.failures)
		p.mg.failures, p.mg.errText, p.mg.retryAt = 0, "", time.Time{}
	}
	p.mg.backlog = more
	if more {
		p.Held(0)
	}
}

// correct applies pending corrections; a failure (payroll or the ledger,
// transient) leaves them pending for the next look, logged once.
func (p *Pipeline) correct(ctx context.Context) {
	if p.Correct == nil {
		return
	}
	_, err := p.Correct(ctx)
	switch {
	case err != nil && ctx.Err() == nil && err.Error() != p.corrErr:
		p.Log.Warn("corrections not applied yet; retrying", "err", err)
		p.corrErr = err.Error()
	case err == nil && p.corrErr != "":
		p.Log.Info("corrections applied again")
		p.corrErr = ""
	}
}

// failedLook counts and reports a failed look and returns the pause
// before the next one.
func (p *Pipeline) failedLook(err error) time.Duration {
	revoked := errors.Is(err, ErrRevoked)
	kind := "failed"
	if revoked {
		kind = "revoked"
	}
	p.mu.Lock()
	p.failures++
	n, changed := p.failures, p.failKind != kind
	p.failKind = kind
	p.mu.Unlock()
	if revoked {
		p.revoked.Store(true)
		if changed {
			p.Log.Error("payroll connection revoked: sending paused, everything stays pending", "err", err)
		} else {
			p.Log.Debug("payroll connection still revoked", "err", err)
		}
		return 30 * time.Second
	}
	var ra time.Duration
	if pe := (*payroll.Error)(nil); errors.As(err, &pe) {
		ra = min(pe.RetryAfter, maxRetryAfter)
	}
	wait := max(min(time.Second<<min(n-1, 5), 30*time.Second), ra)
	if changed {
		p.Log.Warn("delivery failed; retrying", "err", err, "retry_in", wait.String())
	} else {
		p.Log.Debug("delivery failed again; retrying", "err", err, "failures", n, "retry_in", wait.String())
	}
	return wait
}

// endFailures ends a run of failed looks: delivery works (or has nothing
// left to do), and the next failure is news again.
func (p *Pipeline) endFailures() {
	p.mu.Lock()
	n := p.failures
	p.failures, p.failKind = 0, ""
	p.mu.Unlock()
	if n > 0 {
		p.Log.Info("delivery works again", "failed_looks", n)
	}
}

// nextRetry returns when the first failed batch whose backoff runs is due.
func (p *Pipeline) nextRetry() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first time.Time
	for _, d := range p.perC {
		if at, ok := d.nextRetry(); ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	t.Reset(max(d, 0))
}

// paused reports whether company waits for its connection (gate.go), and
// notes it (Stats.Waiting).
func (p *Pipeline) paused(ctx context.Context, company string) bool {
	if !p.gate.paused(ctx, company) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = map[string]bool{}
	}
	p.waiting[company] = true
	return true
}

func (p *Pipeline) isBusy(company string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy[company]
}

// takeErrs returns (and forgets) the workers' failures; a revocation wins.
func (p *Pipeline) takeErrs() error {
	p.mu.Lock()
	errs := p.errs
	p.errs = nil
	p.mu.Unlock()
	for _, err := range errs {
		if errors.Is(err, ErrRevoked) {
			return err
		}
	}
	return errors.Join(errs...)
}

// look seals what lingered at least linger (0: everything) and starts a
// worker for every company with sealed open batches that has none. It
// returns how many companies have sealed open batches.
func (p *Pipeline) look(ctx context.Context, linger time.Duration) (int, error) {
	p.Init()
	// Both reads run beside intake (the ledger's read pool); the writer is
	// taken only when something is due. A look follows every intake
	// commit, so it must stay cheap whatever the backlog: one index seek
	// per company, and a short list for each company without a worker.
	due, err := p.L.SealDueAny(ctx, linger)
	if err != nil {
		return 0, err
	}
	if due {
		if err := p.L.SealDue(ctx, linger); err != nil {
			return 0, err
		}
	}
	heads, err := p.L.OpenHeads(ctx)
	if err != nil {
		return 0, err
	}
	companies := make([]string, 0, len(heads))
	for c := range heads {
		companies = append(companies, c)
	}
	// Oldest work first: the semaphore lets 2 × InFlight companies drain at
	// once, and the gate InFlight calls go out.
	slices.SortFunc(companies, func(a, b string) int { return cmp.Compare(heads[a], heads[b]) })
	// A company whose recovery waits (Deliverer.Recover) with nothing open
	// has only a revert left half done to finish: its worker does that.
	for _, c := range p.D.RecoveryWaits() {
		if _, ok := heads[c]; !ok {
			companies = append(companies, c)
		}
	}
	for _, c := range companies {
		if p.paused(ctx, c) {
			continue // its connection was revoked: its batches wait (gate.go)
		}
		p.mu.Lock()
		if p.busy[c] {
			p.again[c] = true
			p.mu.Unlock()
			continue
		}
		p.busy[c] = true
		p.mu.Unlock()
		var ids []int64
		if head, ok := heads[c]; ok {
			ids, err = p.L.OpenAfter(ctx, c, head, drainChunk)
		}
		if err != nil {
			p.mu.Lock()
			p.busy[c] = false
			p.mu.Unlock()
			return len(heads), err
		}
		p.workers.Add(1)
		go p.work(ctx, c, ids)
	}
	return len(heads), nil
}

// drainChunk is how many of a company's batches a worker takes at a time.
const drainChunk = 16

// work is a company's worker: it waits for a worker slot, drains the
// company (each call waiting for a call slot), and asks for a look when
// it did something, failed, or a look passed the company over meanwhile.
// A worker that found only failed batches waiting for their backoff asks
// for none: the loop would spin.
func (p *Pipeline) work(ctx context.Context, company string, ids []int64) {
	defer p.workers.Done()
	var err error
	var worked, progressed bool
	select {
	case p.sem <- struct{}{}:
		worked, progressed, err = p.drain(ctx, company, ids)
		<-p.sem
	case <-ctx.Done():
		err = ctx.Err()
	}
	// A revoked connection of its own pauses this company only (gate.go).
	waits := errors.Is(err, ErrRevoked) && p.paused(ctx, company)
	p.mu.Lock()
	p.busy[company] = false
	if err == nil {
		delete(p.waiting, company)
	}
	again := p.again[company]
	delete(p.again, company)
	if err != nil && !waits {
		p.errs = append(p.errs, err)
	}
	p.mu.Unlock()
	if progressed && err == nil {
		p.endFailures()
	}
	if worked || again || err != nil {
		p.Wake()
	}
}

// drain delivers a company's batches, then keeps taking the ones sealed
// meanwhile (full batches are sealed as intake fills them), so that a busy
// company is not held back until the next look. It passes over failed
// batches whose backoff runs, and reports whether it sent anything
// (worked) and whether anything was created or rejected (progressed).
func (p *Pipeline) drain(ctx context.Context, company string, ids []int64) (worked, progressed bool, err error) {
	d := p.deliverer(company)
	before := d.Stats.Created + d.Stats.Rejected
	defer func() { progressed = d.Stats.Created+d.Stats.Rejected > before }()
	// What recovery left of the company (its connection was paused then)
	// is settled before any new batch of it goes.
	if err := d.resume(ctx, p.D, company); err != nil {
		return true, false, err
	}
	for len(ids) > 0 {
		var due []int64
		for _, id := range ids {
			if d.retryDue(id) {
				due = append(due, id)
			}
		}
		if len(due) > 0 {
			worked = true
			if err := d.Deliver(ctx, due); err != nil {
				return worked, false, err
			}
		}
		select {
		case <-p.stop:
			return worked, false, nil
		default:
		}
		// Every open batch after the last one, failed ones included, so
		// that a failed batch whose backoff has run is not held back by
		// others still waiting before it.
		more, err := p.L.OpenAfter(ctx, company, ids[len(ids)-1]+1, drainChunk)
		if err != nil {
			return worked, false, err
		}
		ids = more
	}
	return worked, false, nil
}

// Flush seals what lingered at least linger (0: everything) and delivers
// every sealed open batch — companies in parallel (up to InFlight calls), each
// company's batches in order — and returns when they are sent (for --once
// and the last flush at shutdown; not while Run runs). A failed batch
// gets a round of attempts or, when this pipeline saw it fail, one attempt
// if its backoff has run: Flush never waits for a backoff.
func (p *Pipeline) Flush(ctx context.Context, linger time.Duration) error {
	if p.Correct != nil {
		if _, err := p.Correct(ctx); err != nil {
			return err
		}
	}
	if _, err := p.look(ctx, linger); err != nil {
		return err
	}
	p.workers.Wait()
	return p.takeErrs()
}
