package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/paysync/paysync/ledger"
)

// PipelineLedger is what the sending loop needs beyond delivery.
type PipelineLedger interface {
	SealDue(ctx context.Context, linger time.Duration) error
	OpenBatches(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
}

// Pipeline is the daemon's sending loop: it seals open batches that are
// full or have lingered, and delivers every sealed open batch, oldest
// first (so a company's batches keep their order). Sources only commit to
// the ledger; they never wait for the payroll API.
type Pipeline struct {
	L      PipelineLedger
	D      *Deliverer
	Linger time.Duration // how long a part-full batch waits for more (PAYSYNC_BATCH_LINGER)
	Tick   time.Duration // how often to look (default Linger/4, at least 20ms)
	Log    *slog.Logger

	revoked atomic.Bool
	wake    chan struct{}
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
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
}

// Run loops until ctx ends. Failures are logged and retried on the next
// look; a revoked token pauses sending (everything stays pending) and is
// retried every 30 s, so that a re-connected account resumes by itself.
func (p *Pipeline) Run(ctx context.Context) error {
	p.Init()
	t := time.NewTicker(p.Tick)
	defer t.Stop()
	var pauseUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.wake:
		}
		if time.Now().Before(pauseUntil) {
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
				continue
			}
			p.Log.Warn("delivery failed; retrying on the next look", "err", err)
			pauseUntil = time.Now().Add(time.Second)
			continue
		}
		p.revoked.Store(false)
	}
}

// Flush seals what lingered at least linger (0: everything) and delivers
// every sealed open batch.
func (p *Pipeline) Flush(ctx context.Context, linger time.Duration) error {
	if err := p.L.SealDue(ctx, linger); err != nil {
		return err
	}
	open, err := p.L.OpenBatches(ctx, 0)
	if err != nil || len(open) == 0 {
		return err
	}
	ids := make([]int64, len(open))
	for i, b := range open {
		ids[i] = b.ID
	}
	return p.D.Deliver(ctx, ids)
}
