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

// pipeSink is a PipelinedSink over testSink: PrepareBatch records the
// group and waits prepDelay; the commit it returns waits for commitGate
// (if set) before committing through testSink's rules.
type pipeSink struct {
	*testSink
	prepDelay  time.Duration
	prepared   chan []Message // told of each prepared group (never blocks)
	commitGate func(first Message)
}

func (p *pipeSink) CommitBatch(ctx context.Context, ms []Message) []Result {
	return p.PrepareBatch(ctx, ms)(ctx)
}

func (p *pipeSink) PrepareBatch(ctx context.Context, ms []Message) func(context.Context) []Result {
	select {
	case p.prepared <- ms:
	default:
	}
	time.Sleep(p.prepDelay)
	return func(ctx context.Context) []Result {
		if p.commitGate != nil {
			p.commitGate(ms[0])
		}
		out := make([]Result, len(ms))
		for i, m := range ms {
			out[i].Outcome, out[i].Err = p.Commit(ctx, m)
		}
		return out
	}
}

// TestSource_PipelinedPreparesWhileCommitting: a PipelinedSink's next
// group is prepared while the previous one commits (the first commit
// waits for the second group's prepare and would wait in vain if the two
// ran one after the other); every message is committed and acked once.
func TestSource_PipelinedPreparesWhileCommitting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.AckWait = 2 * time.Second
	secondPrepared := make(chan struct{})
	var once sync.Once
	overlapped := make(chan bool, 1)
	sink := &pipeSink{testSink: newSink(), prepared: make(chan []Message, 100)}
	sink.commitGate = func(first Message) {
		if first.MsgID != "p-0" {
			return
		}
		select {
		case <-secondPrepared:
			overlapped <- true
		case <-time.After(10 * time.Second):
			overlapped <- false
		}
	}
	e.start(cfg, sink)
	e.publish("timesheets.MV8x.load", "p-0", `{"id":"p-0"}`)
	select {
	case <-sink.prepared: // the first group, alone
	case <-time.After(10 * time.Second):
		t.Fatal("the first group was never prepared")
	}
	const n = 20
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("p-%d", i)
		e.publish("timesheets.MV8x.load", id, fmt.Sprintf(`{"id":%q}`, id))
	}
	select {
	case <-sink.prepared:
		once.Do(func() { close(secondPrepared) })
	case <-time.After(15 * time.Second):
		t.Fatal("the second group was never prepared")
	}
	if !<-overlapped {
		t.Fatal("the second group was prepared only after the first committed")
	}
	waitFor(t, 15*time.Second, "every message", func() bool { return sink.numCommitted() == n })
	time.Sleep(2500 * time.Millisecond) // past AckWait: nothing may come back
	for i := range n {
		if got := len(sink.callsFor(fmt.Sprintf("p-%d", i))); got != 1 {
			t.Errorf("p-%d committed %d times", i, got)
		}
	}
	ci := e.consumerInfo("TIMESHEETS", "paysync")
	if ci.NumPending != 0 || ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
		t.Errorf("consumer: pending %d ack pending %d redelivered %d", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
	}
}

// TestSource_CloseWaitsForPrepare: Close while a group is being prepared
// waits for the prepare to end, commits nothing of it, and releases its
// messages, which the next source gets.
func TestSource_CloseWaitsForPrepare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.AckWait = 5 * time.Second
	sink := &pipeSink{testSink: newSink(), prepDelay: time.Second, prepared: make(chan []Message, 10)}
	s, err := New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.publish("timesheets.MV8x.load", "c-1", `{"id":"c-1"}`)
	select {
	case <-sink.prepared:
	case <-time.After(10 * time.Second):
		t.Fatal("no prepare began")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 500*time.Millisecond {
		t.Errorf("Close returned after %v, before the prepare (1 s) ended", took)
	}
	if got := len(sink.allCalls()); got != 0 {
		t.Fatalf("%d commits of a group prepared as Close began", got)
	}
	sink2 := newSink()
	e.start(cfg, sink2)
	waitFor(t, 10*time.Second, "the released message", func() bool { return sink2.numCommitted() == 1 })
}
