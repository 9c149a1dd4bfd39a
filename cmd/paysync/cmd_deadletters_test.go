package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/worker/stream"
)

func TestCLI_DeadLetters(t *testing.T) {
	ns := natstest.Start(t)
	env := map[string]string{"NATS_URL": ns.ClientURL()}
	_, js := natstest.Connect(t, ns.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Usage and configuration errors come before NATS.
	for _, tt := range []struct {
		env  map[string]string
		args []string
		code int
	}{
		{env, []string{"deadletters", "--help"}, 0},
		{env, []string{"deadletters", "--bogus"}, 2},
		{env, []string{"deadletters", "extra"}, 2},
		{map[string]string{}, []string{"deadletters"}, 2},
		{with(env, "PAYSYNC_NATS_DEAD_LETTER", "timesheets.dead"), []string{"deadletters"}, 2},
		{env, []string{"deadletters", "--subject", "timesheets..x"}, 1},
	} {
		if r := runInProcess(t, tt.env, tt.args...); r.code != tt.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tt.args, r.code, tt.code, r.stdout, r.stderr)
		}
	}
	// No stream keeps dead letters yet.
	r := runInProcess(t, env, "deadletters")
	if r.code != 1 || !strings.Contains(r.stderr, "no stream captures the dead-letter subject paysync.deadletter") {
		t.Fatalf("no dead-letter stream: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The streams paysync run creates, and two dead letters as it writes them.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS_DEADLETTER", Subjects: []string{"paysync.deadletter"}}); err != nil {
		t.Fatal(err)
	}
	for _, dl := range []struct{ subject, id, reason, data string }{
		{"timesheets.MV8x.toggl", "t-1", "employee MV8xXzk5 unknown", `{"id":"t-1"}`},
		{"timesheets.MV8y.clockify", "t-2", "code X9 unknown", `{"id":"t-2"}`},
	} {
		m := nats.NewMsg("paysync.deadletter")
		m.Data = []byte(dl.data)
		m.Header.Set(stream.HeaderReason, dl.reason)
		m.Header.Set(stream.HeaderOriginalSubject, dl.subject)
		m.Header.Set(stream.HeaderOriginalMsgID, dl.id)
		m.Header.Set(stream.HeaderStreamSeq, "1")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	r = runInProcess(t, env, "deadletters")
	if r.code != 0 {
		t.Fatalf("list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"SEQ", "SUBJECT", "REASON", "TIME", "timesheets.MV8x.toggl", "employee MV8xXzk5 unknown", "code X9 unknown", "2 dead letters in TIMESHEETS_DEADLETTER"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, r.stdout)
		}
	}

	r = runInProcess(t, env, "deadletters", "--json", "--subject", "timesheets.MV8y.>")
	var out struct {
		Stream      string `json:"stream"`
		DeadLetters []struct {
			Seq     uint64    `json:"seq"`
			Subject string    `json:"subject"`
			MsgID   string    `json:"msg_id"`
			Reason  string    `json:"reason"`
			Time    time.Time `json:"time"`
			Data    string    `json:"data"`
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("--json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if out.Stream != "TIMESHEETS_DEADLETTER" || len(out.DeadLetters) != 1 || out.DeadLetters[0].Seq != 2 ||
		out.DeadLetters[0].MsgID != "t-2" || out.DeadLetters[0].Data != `{"id":"t-2"}` || out.DeadLetters[0].Time.IsZero() {
		t.Errorf("--json: %+v", out)
	}

	if r := runInProcess(t, env, "deadletters", "--seq", "99"); r.code != 1 || !strings.Contains(r.stderr, "no message 99") {
		t.Errorf("--seq 99: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Re-drive one: it is back on its subject, and gone from the dead letters.
	r = runInProcess(t, env, "deadletters", "--redrive", "--seq", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "re-drove 1 of 1") {
		t.Fatalf("--redrive --seq 1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, err := js.Stream(ctx, "TIMESHEETS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "timesheets.MV8x.toggl")
	if err != nil {
		t.Fatalf("not re-driven: %v", err)
	}
	if string(m.Data) != `{"id":"t-1"}` || m.Header.Get(stream.HeaderRedriveOf) != "TIMESHEETS_DEADLETTER:1" {
		t.Errorf("re-driven message %v %s", m.Header, m.Data)
	}
	r = runInProcess(t, env, "deadletters", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.DeadLetters) != 1 || out.DeadLetters[0].Seq != 2 {
		t.Errorf("after the re-drive: %v %+v", err, out)
	}

	// Unreachable NATS: exit 1, no password in the message.
	r = runInProcess(t, with(env, "NATS_URL", "nats://u:s3cr3t@127.0.0.1:1"), "deadletters")
	if r.code != 1 || strings.Contains(r.stderr, "s3cr3t") || !strings.Contains(r.stderr, "cannot reach NATS") {
		t.Errorf("unreachable: exit %d\n%s", r.code, r.stderr)
	}
}
