package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/paysync/paysync/console"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
	"github.com/paysync/paysync/worker/stream"
)

// The operator console (package console): `paysync console` serves it for
// a ledger without a daemon; `paysync run` serves it beside the daemon on
// PAYSYNC_CONSOLE_ADDR.

// consoleSettings are the PAYSYNC_CONSOLE_* variables (config).
type consoleSettings struct {
	listen   console.Listen
	password string
}

func loadConsoleSettings(cfg *config) consoleSettings {
	return consoleSettings{
		listen:   console.Listen{Addr: cfg.ConsoleAddr, CertFile: cfg.ConsoleTLSCert, KeyFile: cfg.ConsoleTLSKey},
		password: string(cfg.ConsolePassword),
	}
}

// consoleActions are the console's actions on session s, as the CLI's
// revert and replay do them (its deliverer, waiter and rules); lock, when
// set, takes the ledger's work lock for one action.
func consoleActions(s *session, rules *mapping.Rules, io stdio, lock func(context.Context) (func(), error)) *console.Actions {
	return &console.Actions{
		Payroll:   s.cl,
		Deliverer: func() *worker.Deliverer { return s.deliverer(io) },
		Waiter:    func() *payroll.Waiter { return s.commandWaiter(io.err) },
		Rules:     rules,
		Company:   s.cfg.CompanyID,
		BatchSize: s.cfg.BatchSize,
		Lock:      lock,
	}
}

// runConsole is `paysync console`: the console for the ledger, until
// stopped. It takes the ledger's work lock only while an action runs, so
// it can stay up between runs of import, revert or replay.
func runConsole(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	cs := loadConsoleSettings(&cfg)
	var rulesFile string
	fs := newFlagSet("console", "console [--addr ADDR] [--rules FILE]", io)
	cfg.apiFlags(fs)
	fs.StringVar(&cs.listen.Addr, "addr", cs.listen.Addr, "listen address (PAYSYNC_CONSOLE_ADDR); the password comes from PAYSYNC_CONSOLE_PASSWORD only")
	fs.StringVar(&rulesFile, "rules", cfg.Mapping, "mapping rules file of replays (PAYSYNC_MAPPING)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cs.listen.Addr == "" {
		return usagef("console: PAYSYNC_CONSOLE_ADDR is empty: nothing to serve")
	}
	if cs.password == "" && !console.LoopbackAddr(cs.listen.Addr) {
		return usagef("console: %s is beyond loopback: set PAYSYNC_CONSOLE_PASSWORD (from the environment), or listen on 127.0.0.1", cs.listen.Addr)
	}
	rules, err := loadRulesFile(rulesFile)
	if err != nil {
		return err
	}
	log := cfg.logger(io.err)
	s, err := cfg.connect(ctx, io, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if s.led == nil { // the token lives in a file: the ledger is opened for the pages
		if s.led, err = cfg.openLedger(ctx); err != nil {
			return err
		}
	}
	lock := func(ctx context.Context) (func(), error) {
		if err := s.lockWork(ctx); err != nil {
			return nil, err
		}
		unlock := s.unlock
		s.unlock = nil
		return unlock, nil
	}
	srv, err := console.New(console.Config{Ledger: s.led, Password: cs.password, Actions: consoleActions(s, rules, io, lock),
		Readiness: consoleChecks(&cfg, s), NATS: natsConfig(&cfg), Mode: "paysync console", Logger: log})
	if err != nil {
		return err
	}
	addr, shutdown, err := srv.Serve(ctx, cs.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.err, "paysync: console on %s (ledger %s); Ctrl-C stops it\n", addr, s.led.Path())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	shutdown(sctx)
	return nil
}

// consoleChecks are the overview's readiness without a daemon: the
// ledger, and the inbox's folder when one is configured (cheap, local);
// payroll is reached when an action needs it.
func consoleChecks(cfg *config, s *session) []worker.Check {
	checks := []worker.Check{{Name: "ledger", Fn: func() error { return s.led.Probe(context.Background(), false).Problem() }}}
	if cfg.Inbox != "" {
		checks = append(checks, worker.Check{Name: "inbox", Fn: func() error {
			return inbox.Probe(inbox.Config{Dir: cfg.Inbox, Schedule: cfg.Schedule}).Problem()
		}})
	}
	checks = append(checks, worker.Check{Name: "payroll", Fn: func() error {
		if s.cl.Tokens().Revoked() {
			return fmt.Errorf("connection revoked: re-connect the payroll account")
		}
		return nil
	}})
	return checks
}

// natsConfig is where the console reads the NATS dead letters (nil: NATS
// is not configured): the stream settings paysync run and paysync
// deadletters use.
func natsConfig(cfg *config) *stream.Config {
	if cfg.NATSURL == "" {
		return nil
	}
	scfg := cfg.streamConfig(nil)
	scfg.Name = "paysync-console"
	return &scfg
}

// serveConsole serves the console beside the daemon (paysync run) on
// PAYSYNC_CONSOLE_ADDR; an empty address serves none. A console that
// cannot listen is logged, and the daemon runs without it.
func serveConsole(ctx context.Context, cs consoleSettings, s *session, d *worker.Daemon, rules *mapping.Rules, cfg *config, log *slog.Logger, io stdio) func(context.Context) {
	none := func(context.Context) {}
	if cs.listen.Addr == "" {
		return none
	}
	a := consoleActions(s, rules, io, nil)
	a.Wake = d.Wake
	srv, err := console.New(console.Config{Ledger: s.led, Password: cs.password, Actions: a, Readiness: d.Checks(),
		NATS: natsConfig(cfg), Mode: "paysync run", Logger: log})
	if err != nil {
		log.Error("console: not served", "err", err)
		return none
	}
	addr, shutdown, err := srv.Serve(ctx, cs.listen)
	if err != nil {
		log.Error("console: not served; the daemon runs without it", "err", err)
		return none
	}
	log.Info("console", "addr", addr)
	return shutdown
}
