package stream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRedrive: invalid messages are kept in the dead-letter stream; once
// their cause is fixed, Redrive lists them and moves them back to their
// original subjects, where the sink commits them; a second run finds
// nothing.
func TestRedrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	sink := newSink()
	sink.invalid = map[string]string{"bad-1": "employee 42 unknown", "bad-2": "code X9 unknown"}
	e.start(cfg, sink)

	e.publish("timesheets.MV8x.toggl", "bad-1", `{"id":"bad-1"}`)
	e.publish("timesheets.MV8y.clockify", "bad-2", `{"id":"bad-2"}`)
	e.publish("timesheets.MV8x.toggl", "good-1", `{"id":"good-1"}`)
	waitFor(t, 10*time.Second, "two dead letters", func() bool { return len(e.deadLetters("TIMESHEETS_DEADLETTER")) == 2 })
	waitFor(t, 5*time.Second, "the good one", func() bool { return sink.numCommitted() == 1 })

	ctx := context.Background()
	list, err := Redrive(ctx, cfg, RedriveOptions{List: true})
	if err != nil {
		t.Fatal(err)
	}
	if list.Stream != "TIMESHEETS_DEADLETTER" || len(list.Matched) != 2 || len(list.Redriven) != 0 {
		t.Fatalf("list: %+v", list)
	}
	first := list.Matched[0]
	if first.Seq != 1 || first.Subject != "timesheets.MV8x.toggl" || first.StreamSeq != 1 || first.MsgID != "bad-1" ||
		first.Reason != "employee 42 unknown" || string(first.Data) != `{"id":"bad-1"}` || time.Since(first.Time) > time.Minute {
		t.Errorf("first dead letter %+v", first)
	}
	if got := len(e.deadLetters("TIMESHEETS_DEADLETTER")); got != 2 {
		t.Fatalf("listing removed dead letters: %d left", got)
	}

	// Filters.
	if res, err := Redrive(ctx, cfg, RedriveOptions{List: true, Subject: "timesheets.MV8y.>"}); err != nil || len(res.Matched) != 1 || res.Matched[0].MsgID != "bad-2" {
		t.Errorf("subject filter: %+v, %v", res, err)
	}
	if res, err := Redrive(ctx, cfg, RedriveOptions{List: true, Seq: 2}); err != nil || len(res.Matched) != 1 || res.Matched[0].MsgID != "bad-2" {
		t.Errorf("seq filter: %+v, %v", res, err)
	}
	if _, err := Redrive(ctx, cfg, RedriveOptions{List: true, Seq: 99}); err == nil || !strings.Contains(err.Error(), "no message 99") {
		t.Errorf("unknown seq: %v", err)
	}
	if _, err := Redrive(ctx, cfg, RedriveOptions{List: true, Subject: "timesheets..x"}); err == nil {
		t.Error("a bad subject filter was accepted")
	}

	// The cause of bad-1 is fixed: re-drive only it.
	sink.mu.Lock()
	delete(sink.invalid, "bad-1")
	sink.mu.Unlock()
	res, err := Redrive(ctx, cfg, RedriveOptions{Subject: "timesheets.MV8x.>"})
	if err != nil || len(res.Redriven) != 1 || res.Redriven[0] != 1 {
		t.Fatalf("redrive: %+v, %v", res, err)
	}
	waitFor(t, 10*time.Second, "the re-driven commit", func() bool { return sink.numCommitted() == 2 })
	var redriven *call
	for _, c := range sink.allCalls() {
		if strings.HasPrefix(c.MsgID, "bad-1|redrive:") {
			redriven = &c
		}
	}
	if redriven == nil || redriven.Subject != "timesheets.MV8x.toggl" || string(redriven.Data) != `{"id":"bad-1"}` ||
		redriven.MsgID != "bad-1|redrive:TIMESHEETS_DEADLETTER:1" {
		t.Fatalf("re-driven message: %+v", redriven)
	}
	left := e.deadLetters("TIMESHEETS_DEADLETTER")
	if len(left) != 1 || left[0].Header.Get(HeaderOriginalMsgID) != "bad-2" {
		t.Fatalf("dead letters left: %d", len(left))
	}

	// bad-2 is still invalid: re-driven, it is refused again and kept
	// again (a new dead letter), and that one is not re-driven in a loop.
	res, err = Redrive(ctx, cfg, RedriveOptions{})
	if err != nil || len(res.Redriven) != 1 {
		t.Fatalf("redrive bad-2: %+v, %v", res, err)
	}
	waitFor(t, 10*time.Second, "bad-2 dead-lettered again", func() bool {
		left := e.deadLetters("TIMESHEETS_DEADLETTER")
		return len(left) == 1 && left[0].Sequence > 2
	})
	if n := len(sink.callsFor("bad-2")); n != 1 {
		t.Errorf("bad-2 delivered %d times under its original id", n)
	}
	if res, err := Redrive(ctx, cfg, RedriveOptions{List: true}); err != nil || len(res.Matched) != 1 || res.Matched[0].Reason != "code X9 unknown" ||
		res.Matched[0].MsgID != "bad-2|redrive:TIMESHEETS_DEADLETTER:2" {
		t.Errorf("after: %+v, %v", res, err)
	}
}

func TestRedriveMsgID(t *testing.T) {
	for _, tt := range []struct{ original, of, want string }{
		{"t-1", "DLQ:7", "t-1|redrive:DLQ:7"},
		{"", "DLQ:7", "redrive:DLQ:7"},
		// Re-driven, refused again, re-driven again: no growing suffix.
		{"t-1|redrive:DLQ:7", "DLQ:9", "t-1|redrive:DLQ:9"},
	} {
		if got := redriveMsgID(tt.original, tt.of); got != tt.want {
			t.Errorf("redriveMsgID(%q, %q) = %q, want %q", tt.original, tt.of, got, tt.want)
		}
	}
}

// TestRedrive_Interrupted: a re-drive whose removal from the dead-letter
// stream fails (as after a crash between the two) leaves the dead letter
// where it is; running it again republishes the same message, which the
// source stream drops as a duplicate: the entry arrives once.
func TestRedrive_Interrupted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// An operator's dead-letter stream that refuses deletes.
	dl, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"paysync.deadletter"}, DenyDelete: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	sink := newSink()
	sink.invalid = map[string]string{"bad-1": "employee 42 unknown"}
	e.start(cfg, sink)
	e.publish("timesheets.MV8x.toggl", "bad-1", `{"id":"bad-1"}`)
	waitFor(t, 10*time.Second, "the dead letter", func() bool { return len(e.deadLetters("DLQ")) == 1 })
	sink.mu.Lock()
	sink.invalid = nil
	sink.mu.Unlock()

	for i := range 2 {
		res, err := Redrive(ctx, cfg, RedriveOptions{})
		if err == nil || !strings.Contains(err.Error(), "re-driven to timesheets.MV8x.toggl but not removed") || len(res.Redriven) != 0 {
			t.Fatalf("run %d: %+v, %v", i+1, res, err)
		}
	}
	waitFor(t, 10*time.Second, "the commit", func() bool { return sink.numCommitted() == 1 })
	// The source stream stored the re-drive once: the second publish was
	// dropped as a duplicate (the original and one re-drive in all).
	src, err := e.js.Stream(ctx, "TIMESHEETS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := src.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != 2 {
		t.Fatalf("the source stream stored %d messages, want 2: the original and one re-drive", info.State.LastSeq)
	}
	// Whatever the stream holds has been delivered and settled, so a
	// second delivery would be among the calls counted now.
	waitFor(t, 20*time.Second, "the consumer to be caught up", func() bool {
		ci := e.consumerInfo("TIMESHEETS", "paysync")
		return ci.NumPending == 0 && ci.NumAckPending == 0
	})
	var n int
	for _, c := range sink.allCalls() {
		if strings.HasPrefix(c.MsgID, "bad-1|redrive:") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the re-driven message arrived %d times, want 1", n)
	}
	if info, _ := dl.Info(ctx); info.State.Msgs != 1 {
		t.Errorf("dead-letter stream holds %d", info.State.Msgs)
	}
}

func TestRedrive_NoDeadLetterStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := Redrive(context.Background(), e.config(), RedriveOptions{List: true})
	if err == nil || !strings.Contains(err.Error(), "no stream captures the dead-letter subject paysync.deadletter") {
		t.Errorf("got %v", err)
	}
	cfg := e.config()
	cfg.URL = "nats://user:pw@127.0.0.1:1"
	cfg.reconnectWait = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = Redrive(ctx, cfg, RedriveOptions{List: true})
	if err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("unreachable: %v", err)
	}
}
