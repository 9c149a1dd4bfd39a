package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paysync/paysync/ledger"
)

// PipelineLedger is what the sending loop needs beyond delivery.
type PipelineLedger interface {
	SealDue(ctx context.Context, linger time.Duration) error
	OpenBatches(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
	Lingering(ctx context.Context) (map[string]time.Time, error)
}

// Pipeline is the daemon's sending loop: it seals open batches that are
// full or have lingered, and delivers every sealed open batch, oldest
// first (so a company's batches keep their order). Sources only commit to
// the ledger; they never wait for the payroll API.
type Pipeline struct {
	L        PipelineLedger
	D        *Deliverer    // the template: each company gets its own copy
	Linger   time.Duration // how long a part-full batch waits for more (PAYSYNC_BATCH_LINGER)
	Tick     time.Duration // how often to look (default Linger/4, at least 20ms)
	InFlight int           // companies sent to at once (default 4); one at a time per company
	Log      *slog.Logger

	revoked atomic.Bool
	wake    chan struct{}
	stop    chan struct{}
	once    sync.Once

	mu   sync.Mutex
	perC map[string]*Deliverer
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
		d = &Deliverer{L: p.D.L, P: p.D.P, Log: p.D.Log, MaxAttempts: p.D.MaxAttempts, DeleteChunk: p.D.DeleteChunk,
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
}

// Stop asks Run to return after the look it is in: a call in flight is
// finished, not cut (cancel Run's context for that).
func (p *Pipeline) Stop() {
	p.Init()
	p.once.Do(func() { close(p.stop) })
}

// Run loops until ctx ends. Failures are logged and retried on the next
// look; a revoked token pauses sending (everything stays pending) and is
// retried every 30 s, so that a re-connected account resumes by itself.
func (p *Pipeline) Run(ctx context.Context) error {
	p.Init()
	// A look happens on a wake (a source committed), when the oldest open
	// batch has lingered (so that a lone entry waits linger, not linger
	// plus a tick), and every Tick regardless.
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
			t.Reset(time.Until(pauseUntil))
			continue
		}
		if err := p.Flush(ctx, p.Linger); err != nil {
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
			t.Reset(time.Until(pauseUntil))
			continue
		}
		p.revoked.Store(false)
		if lingering, err := p.L.Lingering(ctx); err == nil {
			for company, at := range lingering {
				next = min(next, max(time.Until(at.Add(p.Linger)), 0))
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
		t.Stop()
		select {
		case <-t.C:
		default:
		}
		t.Reset(next)
	}
}

// Flush seals what lingered at least linger (0: everything) and delivers
// every sealed open batch: companies in parallel (up to InFlight), each
// company's batches in order.
func (p *Pipeline) Flush(ctx context.Context, linger time.Duration) error {
	p.Init()
	if err := p.L.SealDue(ctx, linger); err != nil {
		return err
	}
	open, err := p.L.OpenBatches(ctx, 0)
	if err != nil || len(open) == 0 {
		return err
	}
	var companies []string
	byCompany := map[string][]int64{}
	for _, b := range open {
		if _, ok := byCompany[b.CompanyID]; !ok {
			companies = append(companies, b.CompanyID)
		}
		byCompany[b.CompanyID] = append(byCompany[b.CompanyID], b.ID)
	}
	sem := make(chan struct{}, p.InFlight)
	var wg sync.WaitGroup
	errs := make([]error, len(companies))
	for i, c := range companies {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = p.deliverer(c).Deliver(ctx, byCompany[c])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, ErrRevoked) {
			return err
		}
	}
	return errors.Join(errs...)
}
