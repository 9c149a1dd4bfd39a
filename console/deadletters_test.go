package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/console"
	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/stream"
)

// The rejects page lists the NATS dead letters read-only: sequence,
// subject, reason, when, the entry and field the ledger recorded for the
// message, and the command that re-drives it. Without NATS it says so; with
// NATS down it says so too, and still shows the ledger's rejects, without
// the credentials in NATS_URL.
func TestConsole_DeadLetters(t *testing.T) {
	e := setup(t, testPassword)
	ctx := ctxOf(t)

	// A message whose employee payroll does not know: the ledger records it
	// refused as a whole (with its rejects), the stream dead-letters it
	// with the importer's reason, as paysync run's sink does.
	const subject = "timesheets.MV8x.toggl"
	payload := `{"id":"dl-1","employee_id":"MV8xXzk5","date":"2026-11-02","hours":2,"code":"T1"}`
	mi := &worker.MessageImporter{L: e.led, Mapper: e.mapper, Rules: e.rules, Wire: e.schema, BatchSize: 100}
	reps, errs, err := mi.Plan(ctx, []worker.Message{{Kind: paysync.SourceNATS, Name: subject, Company: stream.CompanyOf(subject), Payload: []byte(payload), Received: time.Now()}})
	if err != nil || errs[0] != nil || reps[0].RejectedAs == 0 {
		t.Fatalf("the bad message: %+v, %v, %v", reps, errs, err)
	}
	_, invalid := worker.MessageOutcome(reps[0])
	if invalid == nil {
		t.Fatal("the bad message is not invalid")
	}
	reason := strings.TrimPrefix(invalid.Error(), "invalid message: ")

	const user, pass = "paysync", "nats-secret-pass"
	ns := natstest.Start(t, natstest.WithUser(user, pass))
	url := strings.Replace(ns.ClientURL(), "nats://", "nats://"+user+":"+pass+"@", 1)
	_, js := natstest.Connect(t, url)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS_DEADLETTER", Subjects: []string{stream.DefaultDeadLetter}}); err != nil {
		t.Fatal(err)
	}
	dl := nats.NewMsg(stream.DefaultDeadLetter)
	dl.Data = []byte(payload)
	dl.Header.Set(stream.HeaderReason, reason)
	dl.Header.Set(stream.HeaderOriginalSubject, subject)
	dl.Header.Set(stream.HeaderStreamSeq, "7")
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		nats *stream.Config
		down bool
		want []string
	}{
		{"without NATS", nil, false, []string{"NATS is not configured"}},
		{"listed", &stream.Config{URL: url}, false, []string{`id="deadletters"`, "<td class=\"n\">1</td>", subject, "MV8xXzk5", "dl-1", "employee",
			"paysync deadletters --redrive --seq 1", fmt.Sprintf(`href="/imports/%d"`, reps[0].RejectedAs)}},
		{"NATS down", &stream.Config{URL: url}, true, []string{"NATS unreachable: ", fmt.Sprintf(`href="/imports/%d"`, reps[0].RejectedAs)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.down {
				ns.Shutdown()
				ns.WaitForShutdown()
			}
			e.serve(t, func(cfg *console.Config) { cfg.NATS = tc.nats })
			c := e.client(t)
			e.login(t, c)
			r := e.get(t, c, "/rejects")
			if r.code != http.StatusOK {
				t.Fatalf("/rejects: %d\n%s", r.code, r.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.body, w) {
					t.Errorf("/rejects lacks %q:\n%s", w, r.body)
				}
			}
			if strings.Contains(r.body, pass) {
				t.Error("/rejects renders the NATS password")
			}
		})
	}
}
