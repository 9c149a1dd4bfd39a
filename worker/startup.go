package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
)

// The reads nothing can start without — the schema probe, the current
// company, reconciling what an earlier run left in flight — go through a
// payroll.Waiter: a 429, a 5xx, a token endpoint failure or a network
// error is waited out (backoff, honouring Retry-After). A command bounds
// the wait; the daemon waits as long as it takes, revoked connection
// included, and says what it waits for on /readyz.

// What the start-up waits for, as /readyz and the log name it.
const (
	WaitSchema   = "the schema probe"
	WaitCompany  = "the current company"
	WaitRecovery = "the recovery of batches left in flight"
)

// StartupPayroll is what the start-up reads need from payroll
// (*payroll.Client): the schema, the current company, and the directory
// the mapper reads employees and meta from.
type StartupPayroll interface {
	mapping.Directory
	Schema(ctx context.Context) (payroll.Schema, error)
	CurrentCompany(ctx context.Context) (string, error)
}

var _ StartupPayroll = (*payroll.Client)(nil)

// StartupReads reads the schema and the default company through w; step
// is told what it reads next (nil: nobody listens).
func StartupReads(ctx context.Context, w *payroll.Waiter, p StartupPayroll, rules *mapping.Rules, configured string, step func(what string)) (schema payroll.Schema, company string, err error) {
	if step == nil {
		step = func(string) {}
	}
	step(WaitSchema)
	err = w.Do(ctx, WaitSchema, func(ctx context.Context) (err error) {
		schema, err = p.Schema(ctx)
		return err
	})
	if err != nil {
		return schema, "", err
	}
	step(WaitCompany)
	err = w.Do(ctx, WaitCompany, func(ctx context.Context) (err error) {
		company, err = DefaultCompany(ctx, p, rules, configured)
		return err
	})
	return schema, company, err
}

// DefaultCompany is the company for entries that name none: configured
// (PAYSYNC_COMPANY_ID or --company), else the rules file's, else (only when
// needed) the account's current company. "" means the rules decide.
func DefaultCompany(ctx context.Context, p StartupPayroll, rules *mapping.Rules, configured string) (string, error) {
	if configured != "" || (rules != nil && rules.Company != "") {
		return configured, nil
	}
	id, err := p.CurrentCompany(ctx)
	if err != nil {
		return "", fmt.Errorf("find current company (set PAYSYNC_COMPANY_ID to skip): %w", err)
	}
	return id, nil
}

// WaitReason is the short, secret-free reason of a start-up failure.
func WaitReason(err error) string {
	var pe *payroll.Error
	switch {
	case errors.As(err, &pe) && pe.Class == paysync.Revoked:
		return payroll.ErrRevoked.Error() + " (paysync connect, paysync auth, or a new PAYSYNC_REFRESH_TOKEN)"
	case errors.Is(err, payroll.ErrNoRefreshToken):
		return payroll.ErrNoRefreshToken.Error()
	case errors.As(err, &pe) && pe.Reason != "":
		return pe.Reason
	}
	return oneLine(err.Error())
}

// oneLine folds s's whitespace, line breaks included, into single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// RoundWait shows a pause to the second, or to a tenth below one.
func RoundWait(d time.Duration) time.Duration {
	if d < time.Second {
		return max(d, 0).Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// startupStatus is the daemon's start-up as /readyz reports it: what it
// is doing, and while payroll fails, why and when it tries again.
type startupStatus struct {
	log *slog.Logger
	now func() time.Time

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
		st.what, st.reason, st.next = x.What, WaitReason(x.Err), x.Next
	}
	st.mu.Unlock()
	switch {
	case !x.Changed:
	case x.Err == nil:
		st.log.Info("payroll: answered at last", "for", x.What, "attempts", x.Attempt)
	case paysync.KindOf(x.Err) == paysync.Revoked || errors.Is(x.Err, payroll.ErrNoRefreshToken):
		st.log.Error("payroll: no working token: waiting for an operator to re-connect the account (paysync connect, paysync auth, or a new PAYSYNC_REFRESH_TOKEN); intake goes on where it can, nothing is lost",
			"for", x.What, "reason", WaitReason(x.Err), "err", x.Err.Error())
	default:
		st.log.Warn("payroll: waiting", "for", x.What, "reason", WaitReason(x.Err), "attempt", x.Attempt, "next_try_in", RoundWait(x.Next.Sub(st.now())).String())
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
	if d := RoundWait(st.next.Sub(st.now())); d > 0 {
		next = "next try in " + d.String()
	}
	return fmt.Errorf("waiting for %s: %s, %s", st.what, st.reason, next)
}
