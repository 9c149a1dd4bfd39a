package payroll_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paysync/paysync/payroll"
)

// fakeClock advances only when the waiter sleeps.
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	cancel func() // when set, called at the n-th sleep
	at     int
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	if c.cancel != nil && len(c.slept) == c.at {
		c.cancel()
	}
	return ctx.Err()
}

func waiterWith(c *fakeClock) *payroll.Waiter {
	return &payroll.Waiter{Now: c.Now, Sleep: c.Sleep, Jitter: func(n int64) int64 { return n - 1 }}
}

func perr(class payroll.Class, status int, retryAfter time.Duration) error {
	return &payroll.Error{Op: "SchemaProbe", Class: class, StatusCode: status, RetryAfter: retryAfter, Index: -1, Reason: fmt.Sprintf("HTTP %d", status)}
}

// failing returns fn failing with errs in turn, then succeeding.
func failing(errs ...error) (fn func(context.Context) error, calls *int) {
	calls = new(int)
	return func(context.Context) error {
		*calls++
		if *calls <= len(errs) {
			return errs[*calls-1]
		}
		return nil
	}, calls
}

func TestWaiter_RetriesTransientWithBackoffAndRetryAfter(t *testing.T) {
	c := &fakeClock{now: time.Unix(0, 0)}
	w := waiterWith(c)
	var seen []payroll.Waiting
	w.OnWait = func(x payroll.Waiting) { seen = append(seen, x) }
	fn, calls := failing(
		perr(payroll.NotApplied, 429, 0),
		perr(payroll.NotApplied, 429, 7*time.Second), // Retry-After beyond the backoff: honoured
		perr(payroll.Ambiguous, 500, 0),
		perr(payroll.Ambiguous, 500, 0),
	)
	if err := w.Do(context.Background(), "the schema probe", fn); err != nil {
		t.Fatal(err)
	}
	if *calls != 5 {
		t.Fatalf("%d calls, want 5", *calls)
	}
	// Jitter at its top: the n-th pause is just under 500ms·2^n.
	want := []time.Duration{500*time.Millisecond - 1, 7 * time.Second, 2*time.Second - 1, 4*time.Second - 1}
	if fmt.Sprint(c.slept) != fmt.Sprint(want) {
		t.Errorf("slept %v, want %v", c.slept, want)
	}
	changed := []bool{}
	for _, x := range seen {
		changed = append(changed, x.Changed)
	}
	// Four failures (429, 429, 500, 500), then the success after them.
	if fmt.Sprint(changed) != "[true false true false true]" || seen[4].Err != nil || seen[4].Attempt != 5 {
		t.Errorf("OnWait saw changed=%v (last %+v); want a change at the first 429, the first 500, and the success", changed, seen[len(seen)-1])
	}
	if !seen[1].Next.Equal(time.Unix(0, 0).Add(500*time.Millisecond - 1 + 7*time.Second)) {
		t.Errorf("second wait's Next = %v, want after the Retry-After", seen[1].Next)
	}
}

func TestWaiter_BackoffIsCapped(t *testing.T) {
	c := &fakeClock{now: time.Unix(0, 0)}
	w := waiterWith(c)
	w.Max = 3 * time.Second
	errs := make([]error, 8)
	for i := range errs {
		errs[i] = perr(payroll.NotApplied, 503, 0)
	}
	fn, _ := failing(errs...)
	if err := w.Do(context.Background(), "x", fn); err != nil {
		t.Fatal(err)
	}
	for i, d := range c.slept {
		if d > 3*time.Second || d < time.Millisecond {
			t.Errorf("pause %d: %s, want within (0, 3s]", i, d)
		}
	}
	if last := c.slept[len(c.slept)-1]; last < 1500*time.Millisecond {
		t.Errorf("last pause %s: want the cap's upper half", last)
	}
}

func TestWaiter_Classes(t *testing.T) {
	revoked := perr(payroll.Revoked, 400, 0)
	noToken := &payroll.Error{Op: "SchemaProbe", Class: payroll.NotApplied, Index: -1, Err: fmt.Errorf("access token: %w", payroll.ErrNoRefreshToken)}
	validation := &payroll.Error{Op: "SchemaProbe", Class: payroll.NotApplied, Index: -1, Reason: "request refused by schema validation: introspection is disabled"}
	for _, tc := range []struct {
		name        string
		err         error
		waitRevoked bool
		wantCalls   int // 1: returned at once; 2: retried
		retryOther  bool
		retryRej    bool
	}{
		{"rejected is a configuration error", perr(payroll.Rejected, 200, 0), true, 1, false, false},
		{"not a payroll error", errors.New("ledger: disk I/O error"), true, 1, false, false},
		{"not a payroll error, daemon", errors.New("ledger: database is locked"), true, 2, true, false},
		{"rejected, daemon", perr(payroll.Rejected, 200, 0), true, 1, true, false},
		{"rejected, daemon's recovery", perr(payroll.Rejected, 200, 0), true, 2, true, true},
		{"schema validation", validation, true, 1, false, false},
		{"revoked, import", revoked, false, 1, false, false},
		{"revoked, daemon", revoked, true, 2, false, false},
		{"no refresh token, import", noToken, false, 1, false, false},
		{"no refresh token, daemon", noToken, true, 2, false, false},
		{"not applied", perr(payroll.NotApplied, 429, 0), false, 2, false, false},
		{"ambiguous", perr(payroll.Ambiguous, 502, 0), false, 2, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{now: time.Unix(0, 0)}
			w := waiterWith(c)
			w.WaitRevoked, w.RetryOther, w.RetryRejected = tc.waitRevoked, tc.retryOther, tc.retryRej
			fn, calls := failing(tc.err)
			err := w.Do(context.Background(), "x", fn)
			if *calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d (err %v)", *calls, tc.wantCalls, err)
			}
			if tc.wantCalls == 1 && err != tc.err {
				t.Errorf("err = %v, want the failure itself", err)
			}
			if tc.wantCalls == 2 && err != nil {
				t.Errorf("err = %v after a success", err)
			}
			if tc.waitRevoked && payroll.ClassOf(tc.err) == payroll.Revoked && c.slept[0] != 5*time.Second {
				t.Errorf("paused %s while revoked, want RevokedEvery (5s)", c.slept[0])
			}
		})
	}
}

func TestWaiter_GivesUpAtUntil(t *testing.T) {
	c := &fakeClock{now: time.Unix(0, 0)}
	w := waiterWith(c)
	w.Until = c.now.Add(10 * time.Second)
	last := perr(payroll.NotApplied, 429, 0)
	calls := 0
	err := w.Do(context.Background(), "the schema probe", func(context.Context) error { calls++; return last })
	var we *payroll.WaitError
	if !errors.As(err, &we) || !errors.Is(err, last) || payroll.ClassOf(err) != payroll.NotApplied {
		t.Fatalf("err = %v; want a WaitError wrapping the last failure", err)
	}
	if c.now.After(w.Until) {
		t.Errorf("waited until %v, past Until %v", c.now, w.Until)
	}
	if we.What != "the schema probe" || we.Attempts != calls || calls < 3 {
		t.Errorf("%+v after %d calls", we, calls)
	}
	// The whole bound is used: a backoff that would overshoot it is
	// shortened, so the last try comes within 100ms of Until (a command
	// waits up to PAYSYNC_STARTUP_TIMEOUT, not some jittered part of it).
	if left := w.Until.Sub(c.now); left >= 100*time.Millisecond {
		t.Errorf("gave up %s before Until", left)
	}
	// A Retry-After beyond Until: no point sleeping first.
	c2 := &fakeClock{now: time.Unix(0, 0)}
	w2 := waiterWith(c2)
	w2.Until = c2.now.Add(time.Minute)
	err = w2.Do(context.Background(), "x", func(context.Context) error { return perr(payroll.NotApplied, 429, 2*time.Minute) })
	if !errors.As(err, &we) || len(c2.slept) != 0 {
		t.Errorf("err = %v after sleeping %v; want to give up at once", err, c2.slept)
	}
}

func TestWaiter_StopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &fakeClock{now: time.Unix(0, 0), cancel: cancel, at: 2}
	w := waiterWith(c)
	w.WaitRevoked = true
	err := w.Do(ctx, "x", func(context.Context) error { return perr(payroll.Revoked, 400, 0) })
	if !errors.Is(err, context.Canceled) || len(c.slept) != 2 {
		t.Errorf("err = %v after %d pauses; want context.Canceled after 2", err, len(c.slept))
	}
}
