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
)

// PipelineLedger is what the sending loop needs beyond delivery.
type PipelineLedger interface {
	SealDueAny(ctx context.Context, linger time.Duration) (bool, error)
	SealDue(ctx context.Context, linger time.Duration) error
	OpenHeads(ctx context.Context) (map[string]int64, error)
	OpenAfter(ctx context.Context, company string, from int64, limit int) ([]int64, error)
	Lingering(ctx context.Context) (map[string]time.Time, error)
	SealedPendingAfter(ctx context.Context, company string, after int64, limit int) ([]int64, error)
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
type Pipeline struct {
	L        PipelineLedger
	D        *Deliverer    // the template: each company gets its own copy
	Linger   time.Duration // how long a part-full batch waits for more (PAYSYNC_BATCH_LINGER)
	Tick     time.Duration // how often to look (default Linger/4, at least 20ms)
	InFlight int           // payroll calls in flight at once (default 4); one at a time per company
	Log      *slog.Logger

	revoked atomic.Bool
	wake    chan struct{}
	stop    chan struct{}
	once    sync.Once
	sem     chan struct{} // company workers draining at once: 2 × InFlight
	gate    *callGate     // the calls in flight, shared by the company workers
	workers sync.WaitGroup

	mu   sync.Mutex
	perC map[string]*Deliverer
	busy map[string]bool // companies with a worker running
	errs []error         // workers' failures since the last look
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
			Sleep: p.D.Sleep, Limiter: p.D.Limiter, OnBatch: p.D.OnBatch}
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
}

// Stop asks Run to return once its workers have finished the batch they
// are sending: a call in flight is finished, not cut (cancel Run's context
// for that).
func (p *Pipeline) Stop() {
	p.Init()
	p.once.Do(func() { close(p.stop) })
}

// Run loops until ctx ends or Stop. Failures are logged and retried on a
// later look; a revoked token pauses sending (everything stays pending)
// and is retried every 30 s, so that a re-connected account resumes by
// itself.
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
		err := p.look(ctx, p.Linger)
		if err == nil {
			err = p.takeErrs()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrRevoked) {
				p.revoked.Store(true)
				pauseUntil = time.Now().Add(30 * time.Second)
				p.Log.Error("payroll connection revoked: sending paused, everything stays pending", "err", err)
			} else {
				p.Log.Warn("delivery failed; retrying on the next look", "err", err)
				pauseUntil = time.Now().Add(time.Second)
			}
			resetTimer(t, time.Until(pauseUntil))
			continue
		}
		p.revoked.Store(false)
		if lingering, err := p.L.Lingering(ctx); err == nil {
			for company, at := range lingering {
				next = min(next, max(time.Until(at.Add(p.Linger)), 0))
				if p.isBusy(company) {
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
		resetTimer(t, next)
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	t.Reset(max(d, 0))
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
// worker for every company with sealed open batches that has none.
func (p *Pipeline) look(ctx context.Context, linger time.Duration) error {
	p.Init()
	// Both reads run beside intake (the ledger's read pool); the writer is
	// taken only when something is due. A look follows every intake
	// commit, so it must stay cheap whatever the backlog: one index seek
	// per company, and a short list for each company without a worker.
	due, err := p.L.SealDueAny(ctx, linger)
	if err != nil {
		return err
	}
	if due {
		if err := p.L.SealDue(ctx, linger); err != nil {
			return err
		}
	}
	heads, err := p.L.OpenHeads(ctx)
	if err != nil || len(heads) == 0 {
		return err
	}
	companies := make([]string, 0, len(heads))
	for c := range heads {
		companies = append(companies, c)
	}
	// Oldest work first: the semaphore lets 2 × InFlight companies drain at
	// once, and the gate InFlight calls go out.
	slices.SortFunc(companies, func(a, b string) int { return cmp.Compare(heads[a], heads[b]) })
	for _, c := range companies {
		p.mu.Lock()
		if p.busy[c] {
			p.mu.Unlock()
			continue
		}
		p.busy[c] = true
		p.mu.Unlock()
		ids, err := p.L.OpenAfter(ctx, c, heads[c], drainChunk)
		if err != nil {
			p.mu.Lock()
			p.busy[c] = false
			p.mu.Unlock()
			return err
		}
		p.workers.Add(1)
		go p.work(ctx, c, ids)
	}
	return nil
}

// drainChunk is how many of a company's batches a worker takes at a time.
const drainChunk = 16

// work is a company's worker: it waits for a worker slot, drains the
// company (each call waiting for a call slot), and asks for a look when
// done.
func (p *Pipeline) work(ctx context.Context, company string, ids []int64) {
	defer p.workers.Done()
	var err error
	select {
	case p.sem <- struct{}{}:
		err = p.drain(ctx, company, ids)
		<-p.sem
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	p.busy[company] = false
	if err != nil {
		p.errs = append(p.errs, err)
	}
	p.mu.Unlock()
	p.Wake()
}

// drain delivers a company's batches, then keeps taking the ones sealed
// meanwhile (full batches are sealed as intake fills them), so that a busy
// company is not held back until the next look.
func (p *Pipeline) drain(ctx context.Context, company string, ids []int64) error {
	d := p.deliverer(company)
	for len(ids) > 0 {
		if err := d.Deliver(ctx, ids); err != nil {
			return err
		}
		select {
		case <-p.stop:
			return nil
		default:
		}
		more, err := p.L.SealedPendingAfter(ctx, company, ids[len(ids)-1], drainChunk)
		if err != nil {
			return err
		}
		ids = more
	}
	return nil
}

// Flush seals what lingered at least linger (0: everything) and delivers
// every sealed open batch — companies in parallel (up to InFlight calls), each
// company's batches in order — and returns when they are sent (for --once
// and the last flush at shutdown; not while Run runs).
func (p *Pipeline) Flush(ctx context.Context, linger time.Duration) error {
	if err := p.look(ctx, linger); err != nil {
		return err
	}
	p.workers.Wait()
	return p.takeErrs()
}
