package main

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
	"github.com/paysync/paysync/worker/stream"
	"golang.org/x/time/rate"
)

// runRun is `paysync run`: the configuration, then worker.Daemon wired to
// the session (payroll client and ledger), the metrics and health listener
// and the signals; `--once` runs the same parts once.
func runRun(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	once, rulesFile := false, ""
	fs := newFlagSet("run", "run [--once] [--http-addr ADDR]", io)
	cfg.apiFlags(fs)
	fs.BoolVar(&once, "once", false, "poll the inbox once (looking twice, a second apart), deliver everything, and exit")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "metrics and health listener; empty to disable (PAYSYNC_HTTP_ADDR)")
	fs.StringVar(&rulesFile, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING)")
	cfg.readFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.validateRun(); err != nil {
		return err
	}
	rules, err := loadRulesFile(rulesFile)
	if err != nil {
		return err
	}
	log, level := cfg.switchableLogger(io.err)
	rm := newRunMetrics(&cfg)
	s, err := cfg.connect(ctx, io, true)
	if err != nil {
		return err
	}
	defer s.Close()
	rm.s = s
	d, in, err := newDaemon(&cfg, s, rules, rm, once, log, io)
	if err != nil {
		return usagef("%v", err)
	}
	if once {
		return runOnce(ctx, s, d, in, io)
	}
	// The listener comes first: /readyz says what the start-up waits for.
	stopHTTP, err := serveMetrics(&cfg, rm.m, d.Checks(), log)
	if err != nil {
		return err
	}
	stopConsole := serveConsole(ctx, loadConsoleSettings(&cfg), s, d, rules, &cfg, log, io)
	stopListeners := func(ctx context.Context) { stopConsole(ctx); stopHTTP(ctx) }
	if err := d.Start(ctx); err != nil {
		stopListeners(ctx)
		return ownershipHint(err)
	}
	runErr := untilStopped(ctx, d, level, log)
	stopDaemon(ctx, d, stopListeners, cfg.ShutdownGrace, log)
	return runErr
}

// newDaemon wires the daemon: the session's ledger and payroll client,
// the inbox (returned for --once's poll) and NATS as configured.
func newDaemon(cfg *config, s *session, rules *mapping.Rules, rm *runMetrics, once bool, log *slog.Logger, io stdio) (*worker.Daemon, *inbox.Inbox, error) {
	dl := s.deliverer(io)
	dl.Log, dl.OnBatch, dl.OnPayParts = log, rm.m.ObserveBatch, rm.m.ObservePayParts
	dl.Limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), max(1, int(cfg.RateLimit)))
	dc := worker.DaemonConfig{Ledger: s.led, Payroll: s.cl, Deliverer: dl, TokenRevoked: s.cl.Tokens().Revoked,
		Rules: rules, Company: cfg.CompanyID, BatchSize: cfg.BatchSize, AllOrNothing: cfg.FilePolicy == "all-or-nothing",
		Linger: cfg.BatchLinger, InFlight: cfg.InFlight, Observe: rm.observe, Logger: log, Now: time.Now}
	dc.Statement, _ = cfg.inboxStatement() // checked by validateRun
	dc.Cutoff, _ = cfg.cutoffSchedule()
	if err := s.routeDaemon(&dc, rm, log); err != nil { // payroll connections per company (cmd_connect.go)
		return nil, nil, err
	}
	var err error
	if dc.Read, err = cfg.readOptions("", rules); err != nil {
		return nil, nil, err
	}
	var in *inbox.Inbox
	if cfg.Inbox != "" {
		ic := inbox.Config{Dir: cfg.Inbox, Schedule: cfg.Schedule, Policy: inbox.Policy(cfg.FilePolicy), Logger: log, OnFile: rm.m.ObserveInboxFile}
		if once {
			ic.SettleLook = time.Second
		}
		dc.Inbox = func(sink *worker.InboxSink) (_ worker.InboxSource, err error) {
			in, err = inbox.New(ic, sink)
			return in, err
		}
	}
	if cfg.NATSURL != "" {
		dc.Filter = cmp.Or(cfg.NATSFilter, cfg.NATSSubject) // a replica sends only for the companies it takes
	}
	if cfg.NATSURL != "" && !once {
		dc.NATS = func(sink *worker.MessageSink) (_ worker.MessageSource, err error) {
			rm.src, err = stream.New(cfg.streamConfig(log), sink)
			return rm.src, err
		}
	}
	d, err := worker.NewDaemon(dc)
	return d, in, err
}
