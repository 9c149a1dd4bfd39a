package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
)

// DaemonLedger is what the daemon needs from the ledger (*ledger.Ledger):
// intake, delivery and the sending loop, the companies it holds work for
// (the replica ownership check) and its probe (/readyz: the quick one,
// without the integrity check).
type DaemonLedger interface {
	Ledger
	PipelineLedger
	ImportLedger
	MessageLedger
	ReconcileLedger
	CompaniesWithWork(ctx context.Context) ([]string, error)
	Probe(ctx context.Context, full bool) paysync.Check
}

// InboxSource is a folder of files the daemon polls (*inbox.Inbox): its
// polls run with Start's context until Close; Probe checks its folder
// (/readyz).
type InboxSource interface {
	Start(ctx context.Context) error
	Close(ctx context.Context) error
	RunNow()
	Probe() paysync.Check
}

// MessageSource is a message stream the daemon consumes (*stream.Source):
// Start's context bounds only the start; Status says why it does not
// consume.
type MessageSource interface {
	Start(ctx context.Context) error
	Close(ctx context.Context) error
	Status() (ok bool, reason string)
}

// DaemonConfig is what a Daemon is made of.
type DaemonConfig struct {
	Ledger DaemonLedger
	// Payroll serves the start-up reads and the mapper's directory;
	// sending goes through Deliverer.P.
	Payroll StartupPayroll
	// Deliverer is delivery's template (payroll client, rate limit,
	// metrics hooks): recovery runs on it, and the sending loop gives each
	// company a copy. Its clock, when unset, becomes Now.
	Deliverer *Deliverer
	// TokenRevoked reports whether the token source's last refresh was
	// refused (payroll.TokenSource.Revoked); nil: the sending loop alone
	// tells.
	TokenRevoked func() bool
	// Connections, when set, is the payroll connections' /readyz
	// condition (payroll.Router.Check): a revoked one names its companies,
	// which wait while the others' batches keep flowing.
	Connections func() error

	Rules        *mapping.Rules
	Company      string // the configured default company ("": the rules', else the account's current one)
	BatchSize    int
	AllOrNothing bool // the inbox's file policy: nothing of a file with a problem is committed
	// Read are the reader settings of inbox files and NATS messages alike
	// (mapping.EffectiveReadOptions: flags, PAYSYNC_DATE_FORMAT, …, the
	// rules file's read: block).
	Read mapping.ReadOptions
	// Statement makes each inbox file a period statement (PAYSYNC_PERIOD).
	Statement *PeriodStatement
	// Cutoff, when set, holds streamed entries (PAYSYNC_SEND=cutoff) and
	// plans them into their periods' pay parts at its times
	// (PAYSYNC_CUTOFF); nil (PAYSYNC_SEND=immediate): under rules that
	// aggregate, streamed entries are held and merged into their
	// aggregates soon after they arrive (Corrector.Merge, debounced by the
	// pipeline); without aggregation each entry's pay part is created as
	// its batch seals.
	Cutoff   Schedule
	Linger   time.Duration // how long a part-full batch waits for more
	InFlight int           // payroll calls in flight at once

	// Inbox builds the inbox on the sink the daemon gives it; nil: none.
	Inbox func(*InboxSink) (InboxSource, error)
	// NATS builds the NATS source on the sink the daemon gives it; nil:
	// none.
	NATS func(*MessageSink) (MessageSource, error)
	// Filter is the NATS consumer filter of this replica: it sends only
	// for the companies the filter takes (CheckOwnership). "" checks
	// nothing.
	Filter string

	// Observe is told of every committed input (metrics); nil: nobody.
	Observe func(kind paysync.SourceKind, rep Report)
	Logger  *slog.Logger
	Now     func() time.Time // default time.Now
}

// Daemon is `paysync run`: sources that commit to the ledger, and one
// sending loop that delivers what they committed. Start reads what the
// mapper needs and settles what an earlier run left in flight, in the
// background, waiting for payroll as long as it takes (Checks says what
// it waits for); Close stops intake first, then sending.
type Daemon struct {
	cfg    DaemonConfig
	log    *slog.Logger
	pipe   *Pipeline
	im     *Importer
	mi     *MessageImporter
	rec    *Reconciler // takes what intake recorded into the desired state and plans it
	in     InboxSource
	src    MessageSource
	status *startupStatus
	failed chan error // start-up failures that only an operator can fix

	srcStarted atomic.Bool
	startDone  chan struct{}
	stopStart  context.CancelFunc
	stopRun    context.CancelFunc
	sendLoop   sync.WaitGroup

	// mu keeps the start-up from starting anything once the stop began.
	mu                         sync.Mutex
	started, stopping, sending bool
}

// NewDaemon builds the daemon and its sources; a source's configuration
// error is returned here, before anything starts.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Deliverer.Now == nil {
		cfg.Deliverer.Now = cfg.Now // failed batches' backoff
	}
	if cfg.Observe == nil {
		cfg.Observe = func(paysync.SourceKind, Report) {}
	}
	d := &Daemon{
		cfg:       cfg,
		log:       cfg.Logger,
		status:    &startupStatus{log: cfg.Logger, now: cfg.Now, what: WaitSchema},
		failed:    make(chan error, 2),
		startDone: make(chan struct{}),
	}
	d.pipe = &Pipeline{L: cfg.Ledger, D: cfg.Deliverer, Linger: cfg.Linger, InFlight: cfg.InFlight, Log: cfg.Logger, Now: cfg.Now}
	d.rec = &Reconciler{L: cfg.Ledger, Rules: cfg.Rules, BatchSize: cfg.BatchSize, Linger: cfg.Linger, Now: cfg.Now, Log: cfg.Logger}
	d.pipe.Correct = func(ctx context.Context) (int, error) {
		if d.rec.Mapper == nil { // not before the start-up reads
			return 0, nil
		}
		switch {
		case cfg.Cutoff != nil:
			// Reconciled at the cutoff's schedule only.
			return 0, nil
		case d.pipe.Merge != nil:
			// Held entries are taken in soon after they arrive (Merge,
			// debounced by the linger); a change of desired state made
			// meanwhile (an operation, a period opened) is planned now.
			bs, err := d.rec.Reconcile(ctx, 0)
			return len(bs), err
		}
		bs, err := d.rec.Apply(ctx, 0)
		return len(bs), err
	}
	d.pipe.Init()
	if cfg.Inbox != nil {
		d.im = &Importer{L: cfg.Ledger, Rules: cfg.Rules, Read: cfg.Read, BatchSize: cfg.BatchSize, AllOrNothing: cfg.AllOrNothing, Statement: cfg.Statement}
		sink := &FileSink{im: d.im, wake: d.pipe.Wake, observe: cfg.Observe}
		in, err := cfg.Inbox(sink.InboxSink())
		if err != nil {
			return nil, err
		}
		d.in = in
	}
	if cfg.Cutoff != nil {
		d.pipe.CutoffAt = cfg.Cutoff
		d.pipe.Cutoff = func(ctx context.Context) error {
			if d.rec.Mapper == nil {
				return errors.New("not started: waiting for payroll")
			}
			rc := *d.rec
			rc.Linger = 0 // everything, now: the next chance is the next cutoff
			bs, err := rc.Apply(ctx, 0)
			d.log.Info("cutoff", "batches", len(bs))
			return err
		}
	}
	// Streamed entries are reconciled soon after they arrive, debounced by
	// the linger (one pay part per group, or per entry line without
	// aggregation: either way batches fill up to their size meanwhile).
	held, merge := func(int) { d.pipe.Wake() }, cfg.Cutoff == nil
	if merge && cfg.NATS != nil {
		// PAYSYNC_SEND=immediate with aggregation: streamed entries are
		// held at intake and merged into their aggregates soon after
		// (debounced by the pipeline), so that one company × employee ×
		// code × rate × period is one pay part, as for a file.
		d.pipe.Merge = func(ctx context.Context) (bool, error) {
			if d.rec.Mapper == nil {
				return true, errors.New("not started: waiting for payroll")
			}
			_, err := d.rec.Apply(ctx, 0)
			return false, err
		}
		d.pipe.HeldFull = cfg.BatchSize
		d.pipe.Held(0) // an earlier run may have left entries held
		held = func(n int) { d.pipe.Held(n); d.pipe.Wake() }
	}
	if cfg.NATS != nil {
		d.mi = &MessageImporter{L: cfg.Ledger, Rules: cfg.Rules, BatchSize: cfg.BatchSize, Read: cfg.Read}
		src, err := cfg.NATS(&MessageSink{mi: d.mi, wake: held, observe: cfg.Observe})
		if err != nil {
			return nil, err
		}
		d.src = src
	}
	return d, nil
}

// checkOwner refuses a replica whose ledger holds work of a company its
// filter does not take: before anything, recovery included, talks to
// payroll (docs/scaling.md).
func (d *Daemon) checkOwner(ctx context.Context) error {
	if d.cfg.Filter == "" {
		return nil
	}
	companies, err := d.cfg.Ledger.CompaniesWithWork(ctx)
	if err != nil {
		return err
	}
	return CheckOwnership(companies, d.cfg.Filter)
}

// readMapper does the start-up reads through w and gives the sources the
// mapper they need (the schema and the default company).
func (d *Daemon) readMapper(ctx context.Context, w *payroll.Waiter, step func(string)) error {
	schema, company, err := StartupReads(ctx, w, d.cfg.Payroll, d.cfg.Rules, d.cfg.Company, step)
	if err != nil {
		return err
	}
	d.setMapper(mapping.NewMapper(d.cfg.Rules, mapping.NewCache(d.cfg.Payroll), schema, company), schema)
	return nil
}

func (d *Daemon) setMapper(mapper *mapping.Mapper, wire mapping.WireChecker) {
	d.rec.Mapper, d.rec.Wire = mapper, wire
	if d.im != nil {
		d.im.Mapper, d.im.Wire = mapper, wire
	}
	if d.mi != nil {
		d.mi.Mapper, d.mi.Wire = mapper, wire
	}
}

// Start checks the replica's ownership, then starts in the background and
// returns: the start-up reads wait for payroll as long as it takes (a
// revoked connection included: a token saved meanwhile is picked up),
// then intake starts, what an earlier run left in flight is settled, and
// the sending loop runs. A failure only an operator can fix comes on
// Failed. ctx bounds the start-up; the sources and the sending loop run
// until Close.
func (d *Daemon) Start(ctx context.Context) error {
	if err := d.checkOwner(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return errors.New("daemon: start: already started or closed")
	}
	d.started = true
	startCtx, stopStart := context.WithCancel(ctx)
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	d.stopStart, d.stopRun = stopStart, stopRun
	go d.start(startCtx, runCtx)
	return nil
}

func (d *Daemon) start(startCtx, runCtx context.Context) {
	defer close(d.startDone)
	w := &payroll.Waiter{WaitRevoked: true, RetryOther: true, Max: 10 * time.Second, OnWait: d.status.onWait, Now: d.cfg.Now}
	if err := d.readMapper(startCtx, w, d.status.step); err != nil {
		if startCtx.Err() == nil {
			d.failed <- err
		}
		return
	}
	// Intake first: it commits to the ledger, which needs no payroll call
	// beyond what the mapper reads.
	var err error
	d.mu.Lock()
	if !d.stopping && d.in != nil {
		err = d.in.Start(runCtx)
	}
	d.mu.Unlock()
	if err != nil {
		d.failed <- err
		return
	}
	if d.src != nil {
		d.srcStarted.Store(true)
		go func() {
			if err := d.src.Start(startCtx); err != nil && startCtx.Err() == nil { // start-up ends with a signal too
				d.failed <- err
			}
		}()
	}
	// Whatever an earlier run left in flight is settled before new work is
	// sent. A batch that cannot be reconciled yet (its company out of reach
	// of the account) is waited for too: the daemon stays up and says so,
	// rather than exiting into a crash loop no command can clear.
	d.status.step(WaitRecovery)
	rw := *w
	rw.RetryRejected = true
	if err := rw.Do(startCtx, WaitRecovery, d.cfg.Deliverer.Recover); err != nil {
		if startCtx.Err() == nil {
			d.failed <- err
		}
		return
	}
	d.mu.Lock()
	if !d.stopping {
		d.sending = true
		d.sendLoop.Add(1)
		go func() { defer d.sendLoop.Done(); d.pipe.Run(runCtx) }()
	}
	d.mu.Unlock()
	d.status.finish()
	d.log.Info("paysync running", "inbox", d.in != nil, "nats", d.src != nil, "linger", d.cfg.Linger.String())
}

// Failed delivers the start-up failures only an operator can fix (a
// refused start-up read, an inbox that cannot start): the daemon cannot
// work, and should be closed.
func (d *Daemon) Failed() <-chan error { return d.failed }

// Wake tells the sending loop there is work now (the console recorded a
// revert's or replay's batches).
func (d *Daemon) Wake() { d.pipe.Wake() }

// PollNow asks the inbox for a poll now (SIGHUP, SIGUSR1): one that begins
// after the ask and takes a file that arrived before it (inbox RunNow).
func (d *Daemon) PollNow() {
	if d.in != nil {
		d.in.RunNow()
	}
}

// Stats sums what the sending loop delivered.
func (d *Daemon) Stats() Stats { return d.pipe.Stats() }

// Check is one /readyz condition: Fn returns why it does not hold.
type Check struct {
	Name string
	Fn   func() error
}

// Checks are the daemon's /readyz conditions: the ledger's and the inbox's
// probes (the adapters' own, as doctor runs them), the start-up done, a
// working payroll token, and NATS consuming.
func (d *Daemon) Checks() []Check {
	checks := []Check{
		{Name: "ledger", Fn: func() error { return d.cfg.Ledger.Probe(context.Background(), false).Problem() }},
		{Name: "payroll", Fn: d.status.check},
		{Name: "payroll token", Fn: func() error {
			// The sending loop's last look, or the token source's last
			// refresh: either one refused means not ready, also while the
			// loop has nothing to send.
			if d.pipe.Revoked() || (d.cfg.TokenRevoked != nil && d.cfg.TokenRevoked()) {
				return errors.New("connection revoked: re-connect the payroll account")
			}
			return nil
		}},
	}
	if d.cfg.Connections != nil {
		checks = append(checks, Check{Name: "payroll connections", Fn: d.cfg.Connections})
	}
	if d.in != nil {
		checks = append(checks, Check{Name: "inbox", Fn: func() error { return d.in.Probe().Problem() }})
	}
	if d.src != nil {
		checks = append(checks, Check{Name: "nats", Fn: func() error {
			if !d.srcStarted.Load() {
				return errors.New("not started: waiting for payroll (the mapper needs the schema)")
			}
			if ok, why := d.src.Status(); !ok {
				return errors.New(why)
			}
			return nil
		}})
	}
	return checks
}

// Close stops gracefully: intake first (acks of committed messages), then
// the sending loop finishes the call it is in and a last flush sends what
// is committed, all within ctx; once ctx ends (the grace ran out, or a
// second signal), everything stops at once — every change is a
// transaction, so the ledger stays consistent and the next start
// reconciles. Closing a daemon that was never started closes its sources.
func (d *Daemon) Close(ctx context.Context) error {
	d.mu.Lock()
	started := d.stopStart != nil
	d.started = true // no Start after Close
	d.mu.Unlock()
	if started {
		context.AfterFunc(ctx, d.stopRun) // in-flight calls are cut only at the end
		d.stopStart()
		select { // a token refresh in flight is not cut (payroll.TokenSource)
		case <-d.startDone:
		case <-ctx.Done():
		}
	}
	d.mu.Lock()
	d.stopping = true
	sending := d.sending
	d.mu.Unlock()
	var errs []error
	if d.src != nil {
		if err := d.src.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close the NATS source: %w", err))
		}
	}
	if d.in != nil {
		if err := d.in.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close the inbox: %w", err))
		}
	}
	d.pipe.Stop()
	d.sendLoop.Wait()
	// Only after recovery: a batch left in flight is reconciled before
	// anything is sent.
	if sending {
		if err := d.pipe.Flush(ctx, 0); err != nil && ctx.Err() == nil {
			errs = append(errs, fmt.Errorf("last flush: %w", err))
		}
	}
	if started {
		d.stopRun()
	}
	d.log.Info("stopped", "created", d.pipe.Stats().Created)
	return errors.Join(errs...)
}

// RunOnce is `paysync run --once` (a command): the replica's ownership
// checked, the start-up reads and the recovery through w (a command's
// bounded waiter), then intake (an inbox poll), then everything committed
// is delivered. Use it instead of Start, not after it.
func (d *Daemon) RunOnce(ctx context.Context, w *payroll.Waiter, intake func(ctx context.Context) error) error {
	if err := d.checkOwner(ctx); err != nil {
		return err
	}
	mapper, schema, err := Begin(ctx, w, d.cfg.Payroll, d.cfg.Rules, d.cfg.Company, d.cfg.Deliverer)
	if err != nil {
		return err
	}
	d.setMapper(mapper, schema)
	if intake != nil {
		if err := intake(ctx); err != nil {
			return err
		}
	}
	return d.pipe.Flush(ctx, 0)
}
