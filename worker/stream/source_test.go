package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/internal/natstest"
)

func TestSource_Start(t *testing.T) {
	t.Parallel()
	t.Run("creates stream and consumer with the configured limits", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		cfg := e.config()
		cfg.Filter = "timesheets.MV8x.>"
		cfg.AckWait, cfg.MaxDeliver, cfg.MaxAckPending, cfg.PullMaxMessages = 7*time.Second, 5, 100, 10
		e.start(cfg, newSink())

		ctx := context.Background()
		st, err := e.js.Stream(ctx, "TIMESHEETS")
		if err != nil {
			t.Fatal(err)
		}
		sc := st.CachedInfo().Config
		if !slices.Equal(sc.Subjects, []string{"timesheets.>"}) || sc.Retention != jetstream.WorkQueuePolicy ||
			sc.Storage != jetstream.FileStorage || sc.Duplicates != 2*time.Minute {
			t.Errorf("stream config: subjects %v retention %v storage %v duplicates %v", sc.Subjects, sc.Retention, sc.Storage, sc.Duplicates)
		}
		cc := e.consumerInfo("TIMESHEETS", "paysync").Config
		if cc.Durable != "paysync" || cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != 7*time.Second ||
			cc.MaxDeliver != 5 || cc.MaxAckPending != 100 || len(cc.BackOff) != 0 || cc.FilterSubject != "timesheets.MV8x.>" {
			t.Errorf("consumer config: %+v", cc)
		}
		dl, err := e.js.Stream(ctx, "TIMESHEETS_DEADLETTER")
		if err != nil {
			t.Fatalf("no dead-letter stream: %v", err)
		}
		if dc := dl.CachedInfo().Config; !slices.Equal(dc.Subjects, []string{"paysync.deadletter"}) ||
			dc.Retention != jetstream.LimitsPolicy || dc.Storage != jetstream.FileStorage || dc.MaxAge != 0 || dc.MaxMsgs > 0 {
			t.Errorf("dead-letter stream config: subjects %v retention %v storage %v max age %v max msgs %d", dc.Subjects, dc.Retention, dc.Storage, dc.MaxAge, dc.MaxMsgs)
		}
	})

	t.Run("uses a stream that already captures the dead-letter subject", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "OPS_DLQ", Subjects: []string{"paysync.>"}}); err != nil {
			t.Fatal(err)
		}
		cfg := e.config()
		cfg.DeadLetterStream = "MY_DLQ"
		s := e.start(cfg, newSink())
		if s.run.dlqStream != "OPS_DLQ" {
			t.Errorf("dead letters through %q, want the existing OPS_DLQ", s.run.dlqStream)
		}
		if _, err := e.js.Stream(context.Background(), "MY_DLQ"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("a second dead-letter stream was created: %v", err)
		}
	})

	t.Run("replaces a BackOff list and keeps an existing stream", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ctx := context.Background()
		// An operator's stream with its own limits, and a consumer someone
		// gave a BackOff list (which silently turned AckWait into 1s).
		if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}, MaxMsgs: 1000}); err != nil {
			t.Fatal(err)
		}
		_, err := e.js.CreateOrUpdateConsumer(ctx, "TIMESHEETS", jetstream.ConsumerConfig{
			Durable: "paysync", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "timesheets.>",
			AckWait: time.Minute, MaxDeliver: 5, BackOff: []time.Duration{time.Second, 2 * time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.consumerInfo("TIMESHEETS", "paysync").Config.AckWait; got != time.Second {
			t.Logf("note: with BackOff the server reports AckWait %v", got)
		}
		e.start(e.config(), newSink())
		cc := e.consumerInfo("TIMESHEETS", "paysync").Config
		if len(cc.BackOff) != 0 || cc.AckWait != 30*time.Second || cc.MaxDeliver != -1 {
			t.Errorf("consumer not brought to the config: backoff %v ack wait %v max deliver %d", cc.BackOff, cc.AckWait, cc.MaxDeliver)
		}
		st, _ := e.js.Stream(ctx, "TIMESHEETS")
		if sc := st.CachedInfo().Config; sc.MaxMsgs != 1000 || sc.Retention != jetstream.LimitsPolicy {
			t.Errorf("existing stream changed: max msgs %d retention %v", sc.MaxMsgs, sc.Retention)
		}
	})

	t.Run("server unreachable: Start returns, Close stops the retrying", func(t *testing.T) {
		t.Parallel()
		cfg := Config{URL: "nats://127.0.0.1:1", Logger: testLogger(t)}
		cfg.reconnectWait = 20 * time.Millisecond
		s, err := New(cfg, newSink())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Start(ctx); err != nil {
			t.Fatalf("Start with the server down: %v", err)
		}
		if s.Connected() {
			t.Error("Connected() with the server down")
		}
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
		if ok, reason := s.Status(); ok || reason != "stopped" {
			t.Errorf("Status() after Close = %v, %q", ok, reason)
		}
	})
}

// TestSource_Bind: bound, the source uses the operator's stream and
// consumer as they are and takes their settings from the server. (Bound
// before they exist: TestSource_StartRefusedStaysUp.)
func TestSource_Bind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.Bind = true
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}}); err != nil {
		t.Fatal(err)
	}
	want := jetstream.ConsumerConfig{Durable: "paysync", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second, MaxDeliver: 4, MaxAckPending: 50}
	if _, err := e.js.CreateConsumer(ctx, "TIMESHEETS", want); err != nil {
		t.Fatal(err)
	}
	sink := newSink()
	s := e.start(cfg, sink)
	e.publish("timesheets.MV8x.toggl", "t-1", `{"id":"t-1"}`)
	waitFor(t, 5*time.Second, "the commit", func() bool { return sink.numCommitted() == 1 })
	cc := e.consumerInfo("TIMESHEETS", "paysync").Config
	if cc.MaxAckPending != 50 || cc.AckWait != 3*time.Second || cc.MaxDeliver != 4 {
		t.Errorf("bind changed the consumer: %+v", cc)
	}
	if r := s.run; r.ackWait != 3*time.Second || r.maxDeliver != 4 {
		t.Errorf("bind did not take the server's settings: ack wait %v max deliver %d", r.ackWait, r.maxDeliver)
	}
}

func TestSource_DeliversAllOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var obs outcomes
	cfg := e.config()
	cfg.Observe = obs.observe
	sink := newSink()
	s := e.start(cfg, sink)

	const n = 200
	for i := range n {
		id := fmt.Sprintf("t-%d", i)
		e.publish(Subject("timesheets", fmt.Sprintf("C%d", i%3), "toggl"), id, fmt.Sprintf(`{"id":%q}`, id))
	}
	waitFor(t, 10*time.Second, "200 commits", func() bool { return sink.numCommitted() == n })
	waitFor(t, 5*time.Second, "the consumer to be caught up", func() bool {
		ci := e.consumerInfo("TIMESHEETS", "paysync")
		return ci.NumPending == 0 && ci.NumAckPending == 0
	})
	if got := len(sink.allCalls()); got != n {
		t.Errorf("%d commits for %d messages", got, n)
	}
	// Observe is called once the ack is confirmed, just after the sink returns.
	waitFor(t, 10*time.Second, "the outcomes", func() bool { return obs.get("committed") == n })
	if obs.get("duplicate")+obs.get("retry")+obs.get("invalid") != 0 {
		t.Errorf("outcomes: %v", obs.n)
	}
	pending, err := s.Pending(context.Background())
	if err != nil || pending != 0 {
		t.Errorf("Pending() = %d, %v", pending, err)
	}
	// Order is kept: one message at a time.
	var last uint64
	for _, c := range sink.allCalls() {
		if c.StreamSeq <= last {
			t.Fatalf("seq %d after %d", c.StreamSeq, last)
		}
		last = c.StreamSeq
	}
}

func TestPublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	entry := paysync.Entry{ID: "t-1", EmployeeID: "MV8xXzE=", Date: "2026-11-02", Code: "T1", Hours: paysync.HoursFromSeconds(27000)}
	subject := Subject("timesheets", "MV8x", "toggl")
	dup, err := Publish(ctx, e.js, subject, entry)
	if err != nil || dup {
		t.Fatalf("first publish: dup %v err %v", dup, err)
	}
	dup, err = Publish(ctx, e.js, subject, entry)
	if err != nil || !dup {
		t.Fatalf("second publish: dup %v err %v", dup, err)
	}
	st, _ := e.js.Stream(ctx, "TIMESHEETS")
	info, _ := st.Info(ctx)
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1", info.State.Msgs)
	}
	raw, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	// The message id names the version: the entry id and the payload's hash.
	if raw.Header.Get("Nats-Msg-Id") != "t-1:"+paysync.PayloadHash(raw.Data)[:16] || !bytes.Contains(raw.Data, []byte(`"id":"t-1"`)) || !bytes.Contains(raw.Data, []byte(`"hours":`)) {
		t.Errorf("message: headers %v data %s", raw.Header, raw.Data)
	}

	// A corrected version within the duplicate window is not dropped.
	corrected := entry
	corrected.Hours = paysync.HoursFromSeconds(30600)
	if dup, err := Publish(ctx, e.js, subject, corrected); err != nil || dup {
		t.Fatalf("corrected version: dup %v err %v", dup, err)
	}

	if _, err := Publish(ctx, e.js, subject, paysync.Entry{Date: "2026-11-02"}); err == nil {
		t.Error("an entry without id was published")
	}
	if _, err := Publish(ctx, e.js, "timesheets.*.x", entry); err == nil {
		t.Error("published on a wildcard")
	}
}

func TestSource_Invalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dead, err := e.nc.SubscribeSync("paysync.deadletter")
	if err != nil {
		t.Fatal(err)
	}
	var obs outcomes
	cfg := e.config()
	cfg.AckWait = time.Second
	cfg.Observe = obs.observe
	sink := newSink()
	sink.invalid = map[string]string{"bad-1": "employee 42 unknown: " + strings.Repeat("x", 300)}
	e.start(cfg, sink)

	e.publish("timesheets.MV8x.toggl", "good-1", `{"id":"good-1"}`)
	e.publish("timesheets.MV8x.toggl", "bad-1", `{"id":"bad-1","hours":"x"}`)
	e.publish("timesheets.MV8x.toggl", "good-2", `{"id":"good-2"}`)

	m, err := dead.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != `{"id":"bad-1","hours":"x"}` {
		t.Errorf("dead letter data %s", m.Data)
	}
	if r := m.Header.Get(HeaderReason); !strings.HasPrefix(r, "employee 42 unknown: xxx") {
		t.Errorf("%s: %q", HeaderReason, r)
	}
	if m.Header.Get(HeaderStreamSeq) != "2" || m.Header.Get(HeaderOriginalSubject) != "timesheets.MV8x.toggl" ||
		m.Header.Get(HeaderOriginalMsgID) != "bad-1" || m.Header.Get("Nats-Msg-Id") != "TIMESHEETS:2:bad-1" {
		t.Errorf("dead letter headers %v", m.Header)
	}

	waitFor(t, 5*time.Second, "the good ones", func() bool { return sink.numCommitted() == 2 })
	// Past AckWait, the terminated message has not come back.
	time.Sleep(1500 * time.Millisecond)
	if calls := sink.callsFor("bad-1"); len(calls) != 1 {
		t.Errorf("invalid message delivered %d times", len(calls))
	}
	if _, err := dead.NextMsg(100 * time.Millisecond); err == nil {
		t.Error("a second dead letter")
	}
	ci := e.consumerInfo("TIMESHEETS", "paysync")
	if ci.NumPending != 0 || ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
		t.Errorf("consumer: pending %d ack pending %d redelivered %d", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
	}
	if obs.get("invalid") != 1 || obs.get("committed") != 2 {
		t.Errorf("outcomes %v", obs.n)
	}
}

// TestSource_InvalidKeptInDeadLetterStream: a dead letter is kept in a
// stream paysync created, not only seen by whoever subscribed at the time.
func TestSource_InvalidKeptInDeadLetterStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	sink := newSink()
	sink.invalid = map[string]string{"bad-1": "employee 42 unknown"}
	e.start(cfg, sink)
	e.publish("timesheets.MV8x.toggl", "bad-1", `{"id":"bad-1"}`)
	waitFor(t, 5*time.Second, "the dead letter to be handled", func() bool {
		ci := e.consumerInfo("TIMESHEETS", "paysync")
		return len(sink.callsFor("bad-1")) == 1 && ci.NumPending == 0 && ci.NumAckPending == 0
	})

	ctx := context.Background()
	st, err := e.js.Stream(ctx, "TIMESHEETS_DEADLETTER")
	if err != nil {
		t.Fatalf("the dead letter was not kept: %v", err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "paysync.deadletter")
	if err != nil {
		t.Fatalf("the dead letter was not kept: %v", err)
	}
	if string(m.Data) != `{"id":"bad-1"}` || m.Header.Get(HeaderReason) != "employee 42 unknown" ||
		m.Header.Get(HeaderOriginalSubject) != "timesheets.MV8x.toggl" || m.Header.Get(HeaderStreamSeq) != "1" {
		t.Errorf("dead letter %v %s", m.Header, m.Data)
	}
}

func TestSource_TransientRetriedAfterDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var obs outcomes
	cfg := e.config()
	cfg.NakDelay = 300 * time.Millisecond
	cfg.Observe = obs.observe
	sink := newSink()
	sink.failFirst = 2
	e.start(cfg, sink)

	e.publish("timesheets.MV8x.toggl", "t-1", `{"id":"t-1"}`)
	waitFor(t, 5*time.Second, "the commit", func() bool { return obs.get("committed") == 1 })
	calls := sink.callsFor("t-1")
	if len(calls) != 3 {
		t.Fatalf("%d deliveries, want 3", len(calls))
	}
	for i, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		gap := calls[i+1].At.Sub(calls[i].At)
		t.Logf("delivery %d → %d after %v (nak delay %v)", calls[i].Delivered, calls[i+1].Delivered, gap, want)
		if gap < want {
			t.Errorf("delivery %d came %v after the failure, want ≥ %v", calls[i+1].Delivered, gap, want)
		}
		if calls[i+1].Delivered != calls[i].Delivered+1 {
			t.Errorf("delivery counts %d then %d", calls[i].Delivered, calls[i+1].Delivered)
		}
	}
	if obs.get("retry") != 2 || obs.get("committed") != 1 {
		t.Errorf("outcomes %v", obs.n)
	}
}

func TestSource_SlowSinkKeptInProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.AckWait = time.Second
	sink := newSink()
	sink.delay = 2500 * time.Millisecond
	e.start(cfg, sink)

	e.publish("timesheets.MV8x.toggl", "slow-1", `{"id":"slow-1"}`)
	waitFor(t, 6*time.Second, "the commit", func() bool { return sink.numCommitted() == 1 })
	time.Sleep(1200 * time.Millisecond) // past AckWait after the ack
	if calls := sink.callsFor("slow-1"); len(calls) != 1 {
		t.Errorf("slow message delivered %d times", len(calls))
	}
	ci := e.consumerInfo("TIMESHEETS", "paysync")
	if ci.NumRedelivered != 0 || ci.NumAckPending != 0 {
		t.Errorf("consumer: redelivered %d ack pending %d", ci.NumRedelivered, ci.NumAckPending)
	}
}

func TestSource_CloseWaitsForInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	cfg.AckWait = time.Second
	sink := newSink()
	sink.delay = time.Second
	sink.started = make(chan Message, 10)
	s, err := New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("t-%d", i)
		e.publish("timesheets.MV8x.toggl", id, fmt.Sprintf(`{"id":%q}`, id))
	}
	select {
	case m := <-sink.started:
		if m.MsgID != "t-1" {
			t.Fatalf("first commit of %s", m.MsgID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no commit began")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(began))
	if got := sink.numCommitted(); got != 1 {
		t.Fatalf("%d commits finished by Close, want 1 (the one in flight)", got)
	}
	if s.Connected() {
		t.Error("connected after Close")
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ci := e.consumerInfo("TIMESHEETS", "paysync")
	if ci.AckFloor.Stream < 1 {
		t.Errorf("the in-flight message's ack was not confirmed: ack floor %d", ci.AckFloor.Stream)
	}

	// A new source gets the released messages, never the finished one.
	sink2 := newSink()
	e.start(cfg, sink2)
	waitFor(t, 5*time.Second, "the released messages", func() bool { return sink2.numCommitted() == 2 })
	time.Sleep(1200 * time.Millisecond) // past AckWait
	if calls := sink2.callsFor("t-1"); len(calls) != 0 {
		t.Errorf("the message committed before Close came again (delivered %d)", calls[0].Delivered)
	}
	if got := len(sink2.allCalls()); got != 2 {
		t.Errorf("%d commits after restart, want 2", got)
	}
}

func TestSource_ServerRestart(t *testing.T) {
	t.Parallel()
	// With the default AckWait, acks unanswered during the restart are
	// confirmed once the server is back: nothing is delivered twice.
	t.Run("default ack wait", func(t *testing.T) {
		t.Parallel()
		if dups := testServerRestart(t, DefaultAckWait); dups != 0 {
			t.Errorf("%d duplicates", dups)
		}
	})
	// With an AckWait shorter than the outage, the messages prefetched
	// before it are redelivered meanwhile: the sink sees them again, as
	// redeliveries, and reports them as Duplicate.
	t.Run("ack wait shorter than the outage", func(t *testing.T) {
		t.Parallel()
		testServerRestart(t, 2*time.Second)
	})
}

// testServerRestart restarts the server mid-stream and checks that every
// message is committed once; it returns the number of duplicates.
func testServerRestart(t *testing.T, ackWait time.Duration) int {
	e := newEnv(t)
	port := natstest.Port(t, e.ns)
	sink := newSink()
	sink.delay = 5 * time.Millisecond
	var obs outcomes
	cfg := e.config()
	cfg.Observe = obs.observe
	cfg.AckWait = ackWait
	s := e.start(cfg, sink)

	const first, second = 150, 50
	for i := range first {
		id := fmt.Sprintf("t-%d", i)
		e.publish("timesheets.MV8x.toggl", id, fmt.Sprintf(`{"id":%q}`, id))
	}
	waitFor(t, 10*time.Second, "a third of the commits", func() bool { return sink.numCommitted() >= first/3 })

	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	waitFor(t, 5*time.Second, "Connected() to turn false", func() bool { return !s.Connected() })
	atShutdown := sink.numCommitted()
	time.Sleep(300 * time.Millisecond)

	began := time.Now()
	e.ns = natstest.Start(t, natstest.WithStoreDir(e.dir), natstest.WithPort(port))
	waitFor(t, 10*time.Second, "Connected() to turn true", func() bool { return s.Connected() })
	t.Logf("committed %d before the shutdown; reconnected %v after the restart", atShutdown, time.Since(began))
	waitFor(t, 10*time.Second, "the test client to reconnect", e.nc.IsConnected)

	for i := first; i < first+second; i++ {
		id := fmt.Sprintf("t-%d", i)
		e.publish("timesheets.MV8x.toggl", id, fmt.Sprintf(`{"id":%q}`, id))
	}
	waitFor(t, 15*time.Second, "all commits", func() bool { return sink.numCommitted() == first+second })
	waitFor(t, 5*time.Second, "the consumer to be caught up", func() bool {
		ci := e.consumerInfo("TIMESHEETS", "paysync")
		return ci.NumPending == 0 && ci.NumAckPending == 0
	})
	for i := range first + second {
		if n := len(sink.callsFor(fmt.Sprintf("t-%d", i))); n == 0 {
			t.Errorf("t-%d never delivered", i)
		}
	}
	// Anything seen twice was a redelivery, reported as a Duplicate.
	seen := map[string]bool{}
	for _, c := range sink.allCalls() {
		if k := key(c.Message); seen[k] && c.Delivered < 2 {
			t.Errorf("%s delivered again as a first delivery", k)
		}
		seen[key(c.Message)] = true
	}
	waitFor(t, 10*time.Second, "the outcomes", func() bool { return obs.get("committed") == first+second })
	t.Logf("duplicates (redeliveries): %d", obs.get("duplicate"))
	return obs.get("duplicate")
}

// TestSource_TransientNeverDeadLettered: a sink that keeps failing with a
// plain (transient) error is retried past 20 deliveries — the old
// MaxDeliver — and nothing is dead-lettered.
func TestSource_TransientNeverDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dead, err := e.nc.SubscribeSync("paysync.deadletter")
	if err != nil {
		t.Fatal(err)
	}
	var obs outcomes
	cfg := e.config()
	cfg.NakDelay, cfg.MaxNakDelay = 5*time.Millisecond, 20*time.Millisecond
	cfg.Observe = obs.observe
	sink := newSink()
	sink.alwaysFail = true
	e.start(cfg, sink)

	e.publish("timesheets.MV8x.toggl", "outage-1", `{"id":"outage-1"}`)
	waitFor(t, 30*time.Second, "25 deliveries", func() bool { return len(sink.callsFor("outage-1")) >= 25 })

	if m, err := dead.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("a transient failure was dead-lettered: %s: %s", m.Header.Get(HeaderReason), m.Data)
	}
	if got := e.deadLetters("TIMESHEETS_DEADLETTER"); len(got) != 0 {
		t.Errorf("%d dead letters kept", len(got))
	}
	if obs.get("invalid")+obs.get("dead-lettered") != 0 || obs.get("committed") != 0 {
		t.Errorf("outcomes %v", obs.n)
	}
	if md := e.consumerInfo("TIMESHEETS", "paysync").Config.MaxDeliver; md != -1 {
		t.Errorf("consumer MaxDeliver %d, want -1 (unlimited)", md)
	}

	// The outage ends: the message is committed, once.
	sink.mu.Lock()
	sink.alwaysFail = false
	sink.mu.Unlock()
	waitFor(t, 10*time.Second, "the commit", func() bool { return sink.numCommitted() == 1 })
	waitFor(t, 5*time.Second, "the consumer to be caught up", func() bool {
		ci := e.consumerInfo("TIMESHEETS", "paysync")
		return ci.NumPending == 0 && ci.NumAckPending == 0
	})
}

// TestSource_BoundFiniteMaxDeliver: a bound consumer with a finite
// MaxDeliver (an operator's) will not redeliver after its last delivery.
// There a transient failure is kept as a dead letter that says it was
// transient and can be re-driven, and the start warns about it. Without a
// stream for dead letters, it is not thrown away as a plain message.
func TestSource_BoundFiniteMaxDeliver(t *testing.T) {
	t.Parallel()
	bind := func(t *testing.T, e *env, withDLQ bool) (Config, *logCapture) {
		ctx := context.Background()
		if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.CreateConsumer(ctx, "TIMESHEETS", jetstream.ConsumerConfig{Durable: "paysync", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: 3}); err != nil {
			t.Fatal(err)
		}
		if withDLQ {
			if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEADLETTER", Subjects: []string{"paysync.deadletter"}}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := e.config()
		cfg.Bind, cfg.NakDelay = true, 50*time.Millisecond
		var logs *logCapture
		cfg.Logger, logs = captureLogger(t)
		return cfg, logs
	}

	t.Run("kept as a transient dead letter", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		cfg, logs := bind(t, e, true)
		var obs outcomes
		cfg.Observe = obs.observe
		sink := newSink()
		sink.alwaysFail = true
		s := e.start(cfg, sink)
		if s.run.dlqStream != "DEADLETTER" || s.run.maxDeliver != 3 {
			t.Errorf("dead letters through %q, max deliver %d", s.run.dlqStream, s.run.maxDeliver)
		}
		if logs.count("finite MaxDeliver", "max_deliver=3", "deadletters --redrive") != 1 {
			t.Errorf("no start-up warning about the bound consumer's finite MaxDeliver:\n%s", logs.all())
		}

		e.publish("timesheets.MV8x.toggl", "outage-1", `{"id":"outage-1"}`)
		var got []*jetstream.RawStreamMsg
		waitFor(t, 10*time.Second, "the dead letter", func() bool {
			got = e.deadLetters("DEADLETTER")
			return len(got) > 0
		})
		r := got[0].Header.Get(HeaderReason)
		for _, want := range []string{"transient failure, not an input problem", "MaxDeliver", "re-drive", "ledger busy"} {
			if !strings.Contains(r, want) {
				t.Errorf("reason %q does not say %q", r, want)
			}
		}
		if calls := sink.callsFor("outage-1"); len(calls) != 3 {
			t.Errorf("%d deliveries, want 3", len(calls))
		}
		// The outcome is observed once the message is terminated, just
		// after the dead letter is stored.
		if !eventually(10*time.Second, func() bool { return obs.get("dead-lettered") == 1 }) || obs.get("invalid") != 0 || obs.get("retry") != 2 {
			t.Errorf("outcomes %v", obs.n)
		}

		// Re-driven once the outage is over, it is committed.
		sink.mu.Lock()
		sink.alwaysFail = false
		sink.mu.Unlock()
		res, err := Redrive(context.Background(), cfg, RedriveOptions{})
		if err != nil || len(res.Redriven) != 1 {
			t.Fatalf("Redrive: %+v, %v", res, err)
		}
		waitFor(t, 10*time.Second, "the re-driven commit", func() bool { return sink.numCommitted() == 1 })
	})

	t.Run("no dead-letter stream: warned, and a transient failure stays in the stream", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		dead, err := e.nc.SubscribeSync("paysync.deadletter")
		if err != nil {
			t.Fatal(err)
		}
		cfg, logs := bind(t, e, false)
		sink := newSink()
		sink.alwaysFail = true
		s := e.start(cfg, sink)
		if s.run.dlqStream != "" {
			t.Fatalf("dead letters through %q", s.run.dlqStream)
		}
		if logs.count("no stream captures the dead-letter subject", "LOST") != 1 {
			t.Errorf("no warning that dead letters are lost without a stream:\n%s", logs.all())
		}
		e.publish("timesheets.MV8x.toggl", "outage-1", `{"id":"outage-1"}`)
		waitFor(t, 10*time.Second, "the last delivery to be handled", func() bool {
			return logs.count("still failing at the consumer's last delivery") == 1
		})
		if m, err := dead.NextMsg(200 * time.Millisecond); err == nil {
			t.Errorf("a transient failure was published as a plain dead letter: %s", m.Header.Get(HeaderReason))
		}
		st, err := e.js.Stream(context.Background(), "TIMESHEETS")
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Errorf("the source stream holds %d messages, want the unconsumed one", n)
		}
		if _, err := e.js.Stream(context.Background(), "TIMESHEETS_DEADLETTER"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("bind created a dead-letter stream: %v", err)
		}
	})
}

// TestSource_NATSDownAtStart: with the server down, Start returns at once
// and keeps connecting in the background; the outage is logged once (the
// URL without its password), not per attempt; Status says what it waits
// for; once the server is up it connects, logs that once, and consumes.
func TestSource_NATSDownAtStart(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	url := fmt.Sprintf("nats://paysync:s3cr3t@127.0.0.1:%d", port)
	logger, logs := captureLogger(t)
	cfg := Config{URL: url, Logger: logger, NakDelay: 100 * time.Millisecond}
	cfg.reconnectWait = 20 * time.Millisecond
	sink := newSink()
	s, err := New(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	// Each step has a fresh, generous deadline of its own: one shared from
	// the start could pass on a loaded machine before the last step.
	startCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- s.Start(startCtx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start with NATS down: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Start blocks while NATS is down: the daemon cannot go on")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})

	// Many attempts (one each 20 ms) later: one line, and not ready.
	time.Sleep(time.Second)
	if n := logs.count("nats not reachable"); n != 1 {
		t.Errorf("%d 'nats not reachable' lines, want exactly 1:\n%s", n, logs.all())
	}
	ok, reason := s.Status()
	if ok || s.Connected() || !strings.Contains(reason, fmt.Sprintf("not connected to nats://***@127.0.0.1:%d", port)) {
		t.Errorf("Status() = %v, %q", ok, reason)
	}
	if strings.Contains(logs.all()+reason, "s3cr3t") {
		t.Error("the password is in the log or the status")
	}

	ns := natstest.Start(t, natstest.WithPort(port))
	waitFor(t, 20*time.Second, "Connected() to turn true", s.Connected)
	if ok, reason := s.Status(); !ok || reason != "" {
		t.Errorf("Status() = %v, %q once connected", ok, reason)
	}
	// The connection's handlers run on their own goroutine, and the
	// "consuming" line follows the state: wait for the lines, then count.
	waitFor(t, 10*time.Second, "the 'nats connected' and 'consuming' lines", func() bool {
		return logs.count("nats connected") > 0 && logs.count("level=INFO", "consuming") > 0
	})
	if n := logs.count("nats connected"); n != 1 {
		t.Errorf("%d 'nats connected' lines, want 1", n)
	}
	if n := logs.count("nats not reachable"); n != 1 {
		t.Errorf("%d 'nats not reachable' lines, want 1", n)
	}
	if n := logs.count("level=INFO", "consuming"); n != 1 {
		t.Errorf("%d 'consuming' lines, want 1", n)
	}

	_, js := natstest.Connect(t, ns.ClientURL())
	pubCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.Publish(pubCtx, "timesheets.MV8x.toggl", []byte(`{"id":"t-1"}`), jetstream.WithMsgID("t-1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the commit", func() bool { return sink.numCommitted() == 1 })

	// A restart of the server: one line down, one line up, not per attempt.
	ns.Shutdown()
	ns.WaitForShutdown()
	waitFor(t, 10*time.Second, "Connected() to turn false", func() bool { return !s.Connected() })
	time.Sleep(500 * time.Millisecond)
	if _, reason := s.Status(); !strings.Contains(reason, "disconnected from nats://***@127.0.0.1") {
		t.Errorf("Status() reason %q while disconnected", reason)
	}
	natstest.Start(t, natstest.WithPort(port))
	waitFor(t, 20*time.Second, "Connected() to turn true again", s.Connected)
	waitFor(t, 10*time.Second, "the 'nats reconnected' line", func() bool { return logs.count("nats reconnected") > 0 })
	if d, r := logs.count("nats disconnected"), logs.count("nats reconnected"); d != 1 || r != 1 {
		t.Errorf("%d 'disconnected' and %d 'reconnected' lines, want 1 each", d, r)
	}
}
