package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
)

// A command's start-up reads (worker.StartupReads, and the recovery of
// what an earlier run left in flight) wait at most PAYSYNC_STARTUP_TIMEOUT
// and then name what they waited for; the daemon's wait as long as it
// takes (worker.Daemon).

const waitRecovery = worker.WaitRecovery

// commandWaiter is the waiter of a command's start-up reads: bounded by
// PAYSYNC_STARTUP_TIMEOUT; a revoked connection ends it at once. Each
// change of what goes wrong is told on w (a terminal or a log), once.
func (s *session) commandWaiter(w io.Writer) *payroll.Waiter {
	return &payroll.Waiter{
		Until: time.Now().Add(s.cfg.StartupTimeout),
		OnWait: func(x payroll.Waiting) {
			switch {
			case !x.Changed:
			case x.Err == nil:
				fmt.Fprintf(w, "paysync: payroll answered %s (attempt %d)\n", x.What, x.Attempt)
			default:
				fmt.Fprintf(w, "paysync: payroll: waiting for %s: %s; next try in %s (up to PAYSYNC_STARTUP_TIMEOUT=%s)\n",
					x.What, worker.WaitReason(x.Err), worker.RoundWait(time.Until(x.Next)), s.cfg.StartupTimeout)
			}
		},
	}
}

// startupErr makes a waiter's failure say what was waited for and which
// setting bounds the wait.
func (s *session) startupErr(err error) error {
	var we *payroll.WaitError
	if errors.As(err, &we) {
		return fmt.Errorf("payroll unavailable: %w (PAYSYNC_STARTUP_TIMEOUT=%s)", err, s.cfg.StartupTimeout)
	}
	return err
}

// startupReads reads the schema and the default company through w.
func startupReads(ctx context.Context, w *payroll.Waiter, cl *payroll.Client, rules *mapping.Rules, configured string, step func(what string)) (payroll.Schema, string, error) {
	return worker.StartupReads(ctx, w, cl, rules, configured, step)
}
