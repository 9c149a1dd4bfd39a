package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
)

// The reads a command cannot start without — the schema probe, the
// current company, reconciling what an earlier run left in flight — go
// through a payroll.Waiter: a 429, a 5xx, a token endpoint failure or a
// network error is waited out (backoff, honouring Retry-After). A command
// waits at most PAYSYNC_STARTUP_TIMEOUT and then names what it waited for;
// the daemon waits as long as it takes, revoked connection included, and
// says what it waits for on /readyz.

// What the start-up waits for, as /readyz and the log name it.
const (
	waitSchema   = "the schema probe"
	waitCompany  = "the current company"
	waitRecovery = "the recovery of batches left in flight"
)

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
					x.What, waitReason(x.Err), roundWait(time.Until(x.Next)), s.cfg.StartupTimeout)
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
func startupReads(ctx context.Context, w *payroll.Waiter, cl *payroll.Client, rules *mapping.Rules, configured string, step func(what string)) (schema payroll.Schema, company string, err error) {
	step(waitSchema)
	err = w.Do(ctx, waitSchema, func(ctx context.Context) (err error) {
		schema, err = cl.Schema(ctx)
		return err
	})
	if err != nil {
		return schema, "", err
	}
	step(waitCompany)
	err = w.Do(ctx, waitCompany, func(ctx context.Context) (err error) {
		company, err = defaultCompany(ctx, cl, rules, configured)
		return err
	})
	return schema, company, err
}

// waitReason is the short, secret-free reason of a start-up failure.
func waitReason(err error) string {
	var pe *payroll.Error
	switch {
	case errors.As(err, &pe) && pe.Class == payroll.Revoked:
		return payroll.ErrRevoked.Error() + " (paysync auth, or a new PAYSYNC_REFRESH_TOKEN)"
	case errors.Is(err, payroll.ErrNoRefreshToken):
		return payroll.ErrNoRefreshToken.Error()
	case errors.As(err, &pe) && pe.Reason != "":
		return pe.Reason
	}
	return oneLine(err.Error())
}

// roundWait shows a pause to the second, or to a tenth below one.
func roundWait(d time.Duration) time.Duration {
	if d < time.Second {
		return max(d, 0).Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// startupStatus is the daemon's start-up as /readyz reports it: what it
// is doing, and while payroll fails, why and when it tries again.
type startupStatus struct {
	log *slog.Logger

	mu     sync.Mutex
	done   bool
	what   string
	reason string
	next   time.Time
}

// step: now waiting for what (its first try in flight).
func (st *startupStatus) step(what string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.what, st.reason, st.next = what, "", time.Time{}
}

// finish: the start-up reads are done.
func (st *startupStatus) finish() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
}

// onWait records a failed attempt; it logs only a change of what goes
// wrong (and the recovery), not every attempt.
func (st *startupStatus) onWait(x payroll.Waiting) {
	st.mu.Lock()
	if x.Err != nil {
		st.what, st.reason, st.next = x.What, waitReason(x.Err), x.Next
	}
	st.mu.Unlock()
	switch {
	case !x.Changed:
	case x.Err == nil:
		st.log.Info("payroll: answered at last", "for", x.What, "attempts", x.Attempt)
	case payroll.ClassOf(x.Err) == payroll.Revoked || errors.Is(x.Err, payroll.ErrNoRefreshToken):
		st.log.Error("payroll: no working token: waiting for an operator to re-connect the account (paysync auth, or a new PAYSYNC_REFRESH_TOKEN); intake goes on where it can, nothing is lost",
			"for", x.What, "reason", waitReason(x.Err), "err", x.Err.Error())
	default:
		st.log.Warn("payroll: waiting", "for", x.What, "reason", waitReason(x.Err), "attempt", x.Attempt, "next_try_in", roundWait(time.Until(x.Next)).String())
	}
}

// check is the /readyz condition: nil once started.
func (st *startupStatus) check() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.done:
		return nil
	case st.reason == "":
		return fmt.Errorf("starting: %s", st.what)
	}
	next := "trying again now"
	if d := roundWait(time.Until(st.next)); d > 0 {
		next = "next try in " + d.String()
	}
	return fmt.Errorf("waiting for %s: %s, %s", st.what, st.reason, next)
}
