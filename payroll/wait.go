package payroll

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Waiter retries the reads a command cannot start without (the schema
// probe, the current company, reconciling what an earlier run left in
// flight) through transient failures: not-applied and ambiguous errors are
// retried with capped exponential backoff and jitter, never sooner than
// the server's Retry-After. A revoked connection (or no refresh token at
// all) needs an operator: with WaitRevoked the waiter keeps trying, so
// that a token saved meanwhile is picked up (the TokenSource re-reads its
// store on every attempt); without, it is returned at once. Any other
// failure (rejected, a request the server refuses to validate, not a
// payroll error) is a configuration problem and is returned at once.
type Waiter struct {
	// Until bounds the whole wait, over every Do (zero: until ctx ends).
	// A retry that would start after it is not made: Do returns a
	// *WaitError instead.
	Until time.Time
	// WaitRevoked keeps trying while the connection is revoked (a daemon
	// waits for an operator to re-connect); otherwise that is returned.
	WaitRevoked bool
	// RetryOther also retries, with the same backoff, failures that are
	// not payroll errors (the ledger busy or failing): a daemon stays up
	// and says what it waits for rather than exiting on them.
	RetryOther bool
	// RetryRejected also retries refusals (a company the account can no
	// longer see while batches of it wait to be reconciled): the daemon
	// stays up, not ready, until an operator restores access.
	RetryRejected bool
	// Min is the first backoff (default 500ms), doubling up to Max
	// (default 30s); RevokedEvery is the pause between tries while
	// revoked (default 5s).
	Min, Max, RevokedEvery time.Duration

	Now    func() time.Time                                 // default time.Now
	Sleep  func(ctx context.Context, d time.Duration) error // default: a timer that honours ctx
	Jitter func(n int64) int64                              // a number in [0, n); default rand.Int64N

	// OnWait, when set, is told of every failed attempt that is retried,
	// and (Err nil) of a success that came after failures.
	OnWait func(Waiting)
}

// Waiting is one failed attempt of a Waiter (or, with Err nil, the
// success after some).
type Waiting struct {
	What    string    // what is waited for, e.g. "the schema probe"
	Attempt int       // 1 for the first attempt
	Err     error     // why it failed; nil: it succeeded at last
	Next    time.Time // when the next attempt starts
	// Changed is true on the first failure and whenever the kind of
	// failure (class and HTTP status) differs from the one before: log
	// those, not every attempt.
	Changed bool
}

// minLastTry is the least time left before Until worth another try.
const minLastTry = 100 * time.Millisecond

// maxRetryAfter caps a server's Retry-After: a broken proxy must not park
// a start-up for hours.
const maxRetryAfter = 15 * time.Minute

// WaitError is a Waiter giving up at its Until.
type WaitError struct {
	What     string
	Waited   time.Duration
	Attempts int
	Err      error // the last failure
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("gave up waiting for %s after %s (%d attempts): %v", e.What, e.Waited.Round(time.Second), e.Attempts, e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }

// Do calls fn until it succeeds, fails for good, ctx ends (ctx.Err() is
// returned) or the wait passes Until.
func (w *Waiter) Do(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	now, sleep, jitter := w.Now, w.Sleep, w.Jitter
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = sleepCtx
	}
	if jitter == nil {
		jitter = rand.Int64N
	}
	start := now()
	var lastKind string
	backoffs := 0
	for attempt := 1; ; attempt++ {
		late, err := w.try(ctx, now, fn)
		if late {
			return &WaitError{What: what, Waited: now().Sub(start), Attempts: attempt, Err: err}
		}
		if err == nil {
			if attempt > 1 && w.OnWait != nil {
				w.OnWait(Waiting{What: what, Attempt: attempt, Changed: true})
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var wait time.Duration
		switch cl := ClassOf(err); {
		case needsOperator(err):
			if !w.WaitRevoked {
				return err
			}
			wait = cmpOr(w.RevokedEvery, 5*time.Second)
		case (cl == NotApplied || cl == Ambiguous) && !isValidation(err), cl == 0 && w.RetryOther, cl == Rejected && w.RetryRejected:
			wait = w.backoff(backoffs, jitter)
			backoffs++
			var pe *Error
			if errors.As(err, &pe) && pe.RetryAfter > wait {
				wait = min(pe.RetryAfter, maxRetryAfter)
			}
		default:
			return err
		}
		next := now().Add(wait)
		if !w.Until.IsZero() && next.After(w.Until) {
			// Our own backoff would overshoot the bound: use the time
			// left instead (halving it, so the last tries come close to
			// the bound), unless the server asked for a longer pause or
			// too little is left to try again.
			left := w.Until.Sub(now())
			var pe *Error
			if left < minLastTry || (errors.As(err, &pe) && pe.RetryAfter > left) || needsOperator(err) {
				return &WaitError{What: what, Waited: now().Sub(start), Attempts: attempt, Err: err}
			}
			wait = left / 2
			next = now().Add(wait)
		}
		kind := waitKind(err)
		if w.OnWait != nil {
			w.OnWait(Waiting{What: what, Attempt: attempt, Err: err, Next: next, Changed: kind != lastKind})
		}
		lastKind = kind
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// try runs fn, within Until: a call that retries inside (a reconcile
// does) must not outlast the bound. late: the bound cut it.
func (w *Waiter) try(ctx context.Context, now func() time.Time, fn func(context.Context) error) (late bool, err error) {
	if w.Until.IsZero() {
		return false, fn(ctx)
	}
	fctx, cancel := context.WithTimeout(ctx, w.Until.Sub(now()))
	defer cancel()
	err = fn(fctx)
	return err != nil && fctx.Err() != nil && ctx.Err() == nil, err
}

// needsOperator: nothing but an operator (re-connecting the account, or
// giving paysync a refresh token) makes the call work.
func needsOperator(err error) bool {
	return ClassOf(err) == Revoked || errors.Is(err, ErrNoRefreshToken)
}

// backoff is the n-th pause: Min·2^n capped at Max, the upper half of it
// jittered (never a tight loop, never in step with other replicas).
func (w *Waiter) backoff(n int, jitter func(int64) int64) time.Duration {
	lo, hi := cmpOr(w.Min, 500*time.Millisecond), cmpOr(w.Max, 30*time.Second)
	ceil := min(lo<<min(n, 20), hi)
	half := ceil / 2
	if half <= 0 {
		return ceil
	}
	return half + time.Duration(jitter(int64(half)))
}

// waitKind tells kinds of failure apart for logging: class and status
// (the reason when there is no status: the token endpoint's, a network
// error's).
func waitKind(err error) string {
	var pe *Error
	switch {
	case !errors.As(err, &pe):
		return "other"
	case pe.StatusCode == 0:
		return fmt.Sprintf("%d/%s", pe.Class, pe.Reason)
	}
	return fmt.Sprintf("%d/%d", pe.Class, pe.StatusCode)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
