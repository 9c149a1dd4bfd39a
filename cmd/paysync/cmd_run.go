package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	goio "io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/metrics"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
	"github.com/paysync/paysync/worker/stream"
	"golang.org/x/time/rate"
)

// planOnly lets a source commit intent without sending: the pipeline
// sends, so only one goroutine ever talks create_pay_parts.
type planOnly struct {
	im   *worker.Importer
	wake func()
	obs  func(kind paysync.SourceKind, rep worker.Report)
}

func (p planOnly) Import(ctx context.Context, kind paysync.SourceKind, name string, payload []byte) (worker.Report, error) {
	rep, err := p.im.Plan(ctx, kind, name, payload)
	if err == nil {
		p.obs(kind, rep)
		p.wake()
	}
	return rep, err
}

// ImportFrom streams an inbox file into the ledger (worker/inbox's
// StreamImporter): a file is never whole in memory.
func (p planOnly) ImportFrom(ctx context.Context, kind paysync.SourceKind, name string, r goio.Reader) (worker.Report, error) {
	rep, err := p.im.PlanFrom(ctx, kind, name, r)
	if err == nil {
		p.obs(kind, rep)
		p.wake()
	}
	return rep, err
}

// natsSink commits JetStream messages (each one entry, or {"entries":
// [...]}), a group at a time in one ledger transaction.
type natsSink struct {
	mi   *worker.MessageImporter
	wake func()
	obs  func(kind paysync.SourceKind, rep worker.Report)
}

func (s natsSink) Commit(ctx context.Context, m stream.Message) (stream.Outcome, error) {
	r := s.CommitBatch(ctx, []stream.Message{m})[0]
	return r.Outcome, r.Err
}

func (s natsSink) CommitBatch(ctx context.Context, ms []stream.Message) []stream.Result {
	in := make([]worker.Message, len(ms))
	for i, m := range ms {
		in[i] = worker.Message{Kind: paysync.SourceNATS, Name: m.Subject, Company: stream.CompanyOf(m.Subject), Payload: m.Data, Received: m.Stored}
	}
	out := make([]stream.Result, len(ms))
	reps, errs, err := s.mi.Plan(ctx, in)
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	for i, rep := range reps {
		if errs[i] != nil {
			out[i].Err = errs[i]
			continue
		}
		s.obs(paysync.SourceNATS, rep)
		out[i].Outcome, out[i].Err = natsOutcome(rep)
	}
	s.wake()
	return out
}

func natsOutcome(rep worker.Report) (stream.Outcome, error) {
	if probs := rep.ProblemList(); len(probs) > 0 {
		reasons := make([]string, len(probs))
		for i, p := range probs {
			reasons[i] = p.Error()
		}
		return 0, &stream.Invalid{Reason: strings.Join(reasons, "; ")}
	}
	if rep.Duplicate || (rep.PayParts == 0 && rep.Duplicates > 0) {
		return stream.Duplicate, nil
	}
	return stream.Committed, nil
}

func runRun(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var once bool
	var rulesFile string
	fs := newFlagSet("run", "run [--once] [--http-addr ADDR]", io)
	cfg.apiFlags(fs)
	fs.BoolVar(&once, "once", false, "poll the inbox once (looking twice, a second apart), deliver everything, and exit")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "metrics and health listener; empty to disable (PAYSYNC_HTTP_ADDR)")
	fs.StringVar(&rulesFile, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.Inbox == "" && cfg.NATSURL == "" {
		return usagef("run: nothing to run: set PAYSYNC_INBOX (a folder) and/or NATS_URL")
	}
	if cfg.FilePolicy != "all-or-nothing" && cfg.FilePolicy != "partial" {
		return usagef("config: PAYSYNC_FILE_POLICY: %q is not all-or-nothing or partial", cfg.FilePolicy)
	}
	if cfg.BatchLinger < 0 || cfg.RateLimit <= 0 || cfg.ShutdownGrace <= 0 || cfg.InFlight < 1 {
		return usagef("config: PAYSYNC_BATCH_LINGER, PAYSYNC_RATE_LIMIT, PAYSYNC_IN_FLIGHT and PAYSYNC_SHUTDOWN_GRACE must be positive")
	}
	rules, err := loadRulesFile(rulesFile)
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	l, _ := parseLevel(cfg.LogLevel)
	level.Set(l)
	log := slog.New(slog.NewJSONHandler(io.err, &slog.HandlerOptions{Level: level}))

	var m *metrics.Metrics
	var src *stream.Source
	var s *session
	m = metrics.New(metrics.Funcs{
		TokenRefreshes: func() float64 {
			if s == nil {
				return 0
			}
			return float64(s.cl.Tokens().Refreshes())
		},
		PendingParts: func() float64 {
			if s == nil {
				return 0
			}
			n, _ := s.led.PendingPayParts(context.Background())
			return float64(n)
		},
		ConsumerLag: func() float64 {
			if src == nil {
				return 0
			}
			n, _ := src.Pending(context.Background())
			return float64(n)
		},
	})
	cfg.onCall = func(op string, class payroll.Class, status int, d time.Duration) {
		c := ""
		if class != 0 {
			c = strings.ReplaceAll(class.String(), " ", "_")
		}
		m.ObserveCall(op, c, status, d)
	}
	if s, err = cfg.connect(ctx, io, true); err != nil {
		return err
	}
	defer s.Close()
	// A replica sends only for the companies its NATS filter takes: refuse
	// before anything, recovery included, talks to payroll (docs/scaling.md).
	if cfg.NATSURL != "" {
		companies, err := s.led.CompaniesWithWork(ctx)
		if err != nil {
			return err
		}
		if err := checkOwnership(ctx, companies, cmp.Or(cfg.NATSFilter, cfg.NATSSubject)); err != nil {
			return err
		}
	}

	d := s.deliverer(io)
	d.Log = log
	d.Limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), max(1, int(cfg.RateLimit)))
	d.OnBatch, d.OnPayParts = m.ObserveBatch, m.ObservePayParts
	pipe := &worker.Pipeline{L: s.led, D: d, Linger: cfg.BatchLinger, InFlight: cfg.InFlight, Log: log}
	pipe.Init()
	observe := func(kind paysync.SourceKind, rep worker.Report) {
		m.Entries.WithLabelValues(string(kind), "duplicate").Add(float64(rep.Duplicates))
		m.Entries.WithLabelValues(string(kind), "rejected").Add(float64(len(rep.ProblemList())))
		if rep.ImportID != 0 && !rep.Duplicate {
			m.Entries.WithLabelValues(string(kind), "committed").Add(float64(max(0, rep.Entries-rep.Duplicates)))
		}
	}

	// Sources: they only commit to the ledger; the pipeline sends. They are
	// set up now, so that a configuration error stops here, and started
	// once the schema and the default company are known: their mapper
	// needs both (setMapper).
	var in *inbox.Inbox
	var im *worker.Importer
	var mi *worker.MessageImporter
	if cfg.Inbox != "" {
		im = &worker.Importer{L: s.led, Rules: rules, BatchSize: cfg.BatchSize, AllOrNothing: cfg.FilePolicy == "all-or-nothing"}
		icfg := inbox.Config{Dir: cfg.Inbox, Schedule: cfg.Schedule, Policy: inbox.Policy(cfg.FilePolicy), Logger: log}
		if once {
			icfg.SettleLook = time.Second
		}
		if in, err = inbox.New(icfg, planOnly{im: im, wake: pipe.Wake, obs: observe}); err != nil {
			return usagef("%v", err)
		}
	}
	if cfg.NATSURL != "" && !once {
		mi = &worker.MessageImporter{L: s.led, Rules: rules, BatchSize: cfg.BatchSize}
		scfg := stream.Config{URL: cfg.NATSURL, CredsFile: cfg.NATSCreds, NKeySeedFile: cfg.NATSNKey, CAFile: cfg.NATSCA, CertFile: cfg.NATSCert, KeyFile: cfg.NATSKey,
			Stream: cfg.NATSStream, Subjects: []string{cfg.NATSSubject}, Durable: cfg.NATSDurable, DeadLetter: cfg.NATSDeadLetter, Bind: cfg.NATSBind, Logger: log,
			AckWait: cfg.NATSAckWait, Filter: cfg.NATSFilter}
		if src, err = stream.New(scfg, natsSink{mi: mi, wake: pipe.Wake, obs: observe}); err != nil {
			return usagef("%v", err)
		}
	}
	setMapper := func(schema payroll.Schema, company string) {
		mapper := mapping.NewMapper(rules, mapping.NewCache(s.cl), schema, company)
		if im != nil {
			im.Mapper, im.Wire = mapper, schema
		}
		if mi != nil {
			mi.Mapper, mi.Wire = mapper, schema
		}
	}

	if once {
		return runOnce(ctx, s, d, pipe, in, rules, setMapper, io)
	}

	// The start-up reads wait for payroll as long as it takes (a revoked
	// connection included: a token saved meanwhile is picked up), while
	// /readyz says what they wait for: the listener comes first.
	status := &startupStatus{log: log, what: waitSchema}
	var srcStarted atomic.Bool
	var hsrv *http.Server
	if cfg.HTTPAddr != "" {
		checks := []metrics.Check{
			{Name: "ledger", Fn: func() error { return s.led.CheckWritable(context.Background()) }},
			{Name: "payroll", Fn: status.check},
			{Name: "payroll token", Fn: func() error {
				// The sending loop's last look, or the token source's last
				// refresh: either one refused means not ready, also while the
				// loop has nothing to send.
				if pipe.Revoked() || s.cl.Tokens().Revoked() {
					return errors.New("connection revoked: re-connect the payroll account")
				}
				return nil
			}},
		}
		if src != nil {
			checks = append(checks, metrics.Check{Name: "nats", Fn: func() error {
				if !srcStarted.Load() {
					return errors.New("not started: waiting for payroll (the mapper needs the schema)")
				}
				if ok, why := src.Status(); !ok {
					return errors.New(why)
				}
				return nil
			}})
		}
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("run: listen on PAYSYNC_HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
		}
		var h http.Handler = m.Handler(checks...)
		if cfg.PProf {
			mux := http.NewServeMux()
			mux.Handle("/", h)
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			h = mux
		}
		hsrv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go hsrv.Serve(ln)
		log.Info("metrics and health", "addr", ln.Addr().String())
	}

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	startCtx, stopStart := context.WithCancel(ctx)
	defer stopStart()
	// life keeps the start-up from starting anything once the stop began.
	var life struct {
		sync.Mutex
		stopping, sending bool
	}
	var wg sync.WaitGroup
	failed := make(chan error, 2) // start-up failures that only an operator can fix
	startDone := make(chan struct{})
	w := &payroll.Waiter{WaitRevoked: true, RetryOther: true, Max: 10 * time.Second, OnWait: status.onWait}
	go func() {
		defer close(startDone)
		schema, company, err := startupReads(startCtx, w, s.cl, rules, cfg.CompanyID, status.step)
		if err != nil {
			if startCtx.Err() == nil {
				failed <- err
			}
			return
		}
		setMapper(schema, company)
		// Intake first: it commits to the ledger, which needs no payroll
		// call beyond what the mapper reads.
		life.Lock()
		if !life.stopping && in != nil {
			err = in.Start(runCtx)
		}
		life.Unlock()
		if err != nil {
			failed <- err
			return
		}
		if src != nil {
			srcStarted.Store(true)
			go func() {
				if err := src.Start(startCtx); err != nil && startCtx.Err() == nil { // start-up ends with a signal too
					failed <- err
				}
			}()
		}
		// Whatever an earlier run left in flight is settled before new work
		// is sent.
		status.step(waitRecovery)
		// A batch that cannot be reconciled yet (its company out of reach
		// of the account) is waited for too: the daemon stays up and says
		// so, rather than exiting into a crash loop no command can clear.
		rw := *w
		rw.RetryRejected = true
		if err := rw.Do(startCtx, waitRecovery, d.Recover); err != nil {
			if startCtx.Err() == nil {
				failed <- err
			}
			return
		}
		life.Lock()
		if !life.stopping {
			life.sending = true
			wg.Add(1)
			go func() { defer wg.Done(); pipe.Run(runCtx) }()
		}
		life.Unlock()
		status.finish()
		log.Info("paysync running", "inbox", cfg.Inbox, "nats", cfg.NATSURL != "", "linger", cfg.BatchLinger.String())
	}()

	// SIGHUP or SIGUSR1: poll the inbox now; SIGUSR2: switch debug logging
	// on or off.
	poke := make(chan os.Signal, 1)
	signal.Notify(poke, syscall.SIGUSR1, syscall.SIGHUP, syscall.SIGUSR2)
	defer signal.Stop(poke)
	var runErr error
	for loop := true; loop; {
		select {
		case <-ctx.Done():
			loop = false
		case err := <-failed:
			log.Error("cannot start: stopping", "err", err)
			runErr, loop = err, false
		case sig := <-poke:
			switch {
			case sig == syscall.SIGUSR2 && level.Level() == slog.LevelDebug:
				level.Set(l)
				log.Info("log level back to configured", "level", l.String())
			case sig == syscall.SIGUSR2:
				level.Set(slog.LevelDebug)
				log.Info("debug logging on (SIGUSR2 again to switch it off)")
			case in != nil:
				in.RunNow()
			}
		}
	}

	// Graceful stop: intake first (acks of committed messages), then the
	// sending loop finishes the call it is in and a last flush sends what
	// is committed, all within the grace; a second signal (or the end of
	// the grace) stops at once — every change is a transaction, so the
	// ledger stays consistent and the next start reconciles.
	log.Info("stopping: no new intake; finishing in-flight work", "grace", cfg.ShutdownGrace.String())
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	context.AfterFunc(hardStopOf(ctx), func() {
		log.Warn("second signal: stopping now")
		cancel()
	})
	context.AfterFunc(graceCtx, stopRun) // in-flight calls are cut only at the end
	stopStart()
	select { // a token refresh in flight is not cut (payroll.TokenSource)
	case <-startDone:
	case <-graceCtx.Done():
	}
	life.Lock()
	life.stopping = true
	sending := life.sending
	life.Unlock()
	if src != nil {
		if err := src.Close(graceCtx); err != nil {
			log.Warn("closing the NATS source", "err", err)
		}
	}
	if in != nil {
		if err := in.Close(graceCtx); err != nil {
			log.Warn("closing the inbox", "err", err)
		}
	}
	pipe.Stop()
	wg.Wait()
	// Only after recovery: a batch left in flight is reconciled before
	// anything is sent.
	if sending {
		if err := pipe.Flush(graceCtx, 0); err != nil && graceCtx.Err() == nil {
			log.Warn("last flush", "err", err)
		}
	}
	if hsrv != nil {
		hsrv.Shutdown(graceCtx)
	}
	log.Info("stopped", "created", pipe.Stats().Created)
	return runErr
}

// runOnce is `paysync run --once`: a command, so its start-up reads wait
// at most PAYSYNC_STARTUP_TIMEOUT.
func runOnce(ctx context.Context, s *session, d *worker.Deliverer, pipe *worker.Pipeline, in *inbox.Inbox, rules *mapping.Rules,
	setMapper func(payroll.Schema, string), io stdio) error {
	w := s.commandWaiter(io.err)
	schema, company, err := startupReads(ctx, w, s.cl, rules, s.cfg.CompanyID, func(string) {})
	if err != nil {
		return s.startupErr(err)
	}
	setMapper(schema, company)
	// Whatever an earlier run left in flight is settled before new work.
	if err := w.Do(ctx, waitRecovery, d.Recover); err != nil {
		return s.startupErr(err)
	}
	if in != nil {
		res, err := in.Poll(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(io.out, "inbox: %d processed, %d failed, %d duplicates, %d still being written\n", res.Processed, res.Failed, res.Duplicates, res.Waiting)
	}
	if err := pipe.Flush(ctx, 0); err != nil {
		return err
	}
	st := pipe.Stats()
	fmt.Fprintf(io.out, "delivered: %d pay parts created, %d rejected; %d batches failed\n", st.Created, st.Rejected, st.Failed)
	return nil
}
