package stream

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// batchSink commits groups through testSink's rules, one message at a
// time, recording the group sizes; each group takes groupDelay.
type batchSink struct {
	*testSink
	groupDelay time.Duration
	mu         sync.Mutex
	groups     []int
}

func (b *batchSink) CommitBatch(ctx context.Context, ms []Message) []Result {
	b.mu.Lock()
	b.groups = append(b.groups, len(ms))
	b.mu.Unlock()
	time.Sleep(b.groupDelay)
	out := make([]Result, len(ms))
	for i, m := range ms {
		out[i].Outcome, out[i].Err = b.Commit(ctx, m)
	}
	return out
}

func (b *batchSink) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.groups)
}

// TestSource_Batches: a BatchSink gets the messages at hand in groups;
// every message is committed once and acknowledged (nothing comes back
// after AckWait); an invalid one in a group is dead-lettered and a
// transient failure retried, without holding up the rest of its group.
func TestSource_Batches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dead, err := e.nc.SubscribeSync("paysync.deadletter")
	if err != nil {
		t.Fatal(err)
	}
	var obs outcomes
	cfg := e.config()
	cfg.AckWait = time.Second
	cfg.NakDelay = 100 * time.Millisecond
	cfg.Observe = obs.observe
	sink := &batchSink{testSink: newSink(), groupDelay: 20 * time.Millisecond}
	sink.invalid = map[string]string{"b-77": "unknown employee"}
	sink.failFirst = 0
	e.start(cfg, sink)

	const n = 600
	for i := range n {
		id := fmt.Sprintf("b-%d", i)
		e.publish("timesheets.MV8x.load", id, fmt.Sprintf(`{"id":%q}`, id))
	}
	if _, err := dead.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no dead letter for b-77: %v", err)
	}
	waitFor(t, 15*time.Second, "every good message", func() bool { return sink.numCommitted() == n-1 })
	time.Sleep(1500 * time.Millisecond) // past AckWait: nothing may come back
	for i := range n {
		if got := len(sink.callsFor(fmt.Sprintf("b-%d", i))); got != 1 {
			t.Errorf("b-%d committed %d times", i, got)
		}
	}
	ci := e.consumerInfo("TIMESHEETS", "paysync")
	if ci.NumPending != 0 || ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
		t.Errorf("consumer: pending %d ack pending %d redelivered %d", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
	}
	sizes := sink.sizes()
	if slices.Max(sizes) < 2 {
		t.Errorf("groups %v: never more than one message at a time", sizes)
	}
	if slices.Max(sizes) > cfg.withDefaults().MaxBatch {
		t.Errorf("a group of %d exceeds MaxBatch", slices.Max(sizes))
	}
	if obs.get("committed") != n-1 || obs.get("invalid") != 1 {
		t.Errorf("outcomes %v", obs.n)
	}
	t.Logf("%d groups, largest %d", len(sizes), slices.Max(sizes))
}

// TestSource_BatchTransient: a group whose commit fails transiently is
// retried (after NakDelay) and lands once.
func TestSource_BatchTransient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.NakDelay = 100 * time.Millisecond
	sink := &batchSink{testSink: newSink(), groupDelay: 50 * time.Millisecond}
	sink.failFirst = 1 // every first delivery fails
	e.start(cfg, sink)
	const n = 50
	for i := range n {
		id := fmt.Sprintf("t-%d", i)
		e.publish("timesheets.MV8x.load", id, fmt.Sprintf(`{"id":%q}`, id))
	}
	waitFor(t, 15*time.Second, "every message", func() bool { return sink.numCommitted() == n })
	for i := range n {
		calls := sink.callsFor(fmt.Sprintf("t-%d", i))
		if len(calls) != 2 || calls[1].Delivered != 2 {
			t.Errorf("t-%d: %d calls, want a failed first delivery and a second", i, len(calls))
		}
	}
}
