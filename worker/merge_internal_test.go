package worker

import (
	"testing"
	"time"
)

// TestMergeDue: a merge waits linger after the first entry held since the
// last one (not when the last merge left a backlog), the last merge's
// duration after it ended, and a failed merge's backoff, whichever is
// latest.
func TestMergeDue(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cases := []struct {
		name      string
		heldSince time.Time
		lastEnd   time.Time
		lastTook  time.Duration
		retryAt   time.Time
		backlog   bool
		want      time.Time
	}{
		{name: "first merge: linger after the first entry held", heldSince: t0, want: t0.Add(ms(200))},
		{name: "a quick last merge long ago", heldSince: t0, lastEnd: t0.Add(-time.Minute), lastTook: ms(10), want: t0.Add(ms(200))},
		{name: "a slow last merge just ended: its duration", heldSince: t0, lastEnd: t0.Add(ms(100)), lastTook: ms(300), want: t0.Add(ms(400))},
		{name: "a backlog: no linger", heldSince: t0, lastEnd: t0, lastTook: ms(50), backlog: true, want: t0.Add(ms(50))},
		{name: "a backlog after a quick merge", heldSince: t0.Add(ms(20)), lastEnd: t0, lastTook: ms(5), backlog: true, want: t0.Add(ms(20))},
		{name: "a failed merge's backoff", heldSince: t0, lastEnd: t0, lastTook: ms(5), retryAt: t0.Add(4 * time.Second), want: t0.Add(4 * time.Second)},
		{name: "the backoff has run", heldSince: t0, retryAt: t0.Add(ms(50)), want: t0.Add(ms(200))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mergeDue(c.heldSince, ms(200), c.lastEnd, c.lastTook, c.retryAt, c.backlog); !got.Equal(c.want) {
				t.Errorf("mergeDue = %s, want %s", got.Sub(t0), c.want.Sub(t0))
			}
		})
	}
}
