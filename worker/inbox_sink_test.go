package worker_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/inbox"
)

// The inbox gets the importer in its own terms (inbox.Sink): the report's
// counts and problems one by one, a file that cannot be read as a
// *inbox.ReadError, a revoked connection as inbox.ErrUnavailable (which
// stops the poll), and the importer's policy checked against the inbox's.
func TestInboxSink(t *testing.T) {
	t.Run("report", func(t *testing.T) {
		e := setup(t, sandbox.Options{})
		im := e.importer(t, nil, 2)
		payload := append(ndjson(3, "ok"), `{"id":"bad-1","employee_id":"`+sandbox.EmpMetteHansen+`","date":"2026-11-02","hours":"lots","code":"T1"}`+"\n"+
			`{"id":"bad-2","employee_id":"`+sandbox.EmpLarsNielsen+`","date":"2026-11-02","hours":"some","code":"T1"}`+"\n"...)
		got, err := im.InboxSink().Import(ctx(t), "file", "inbox/hours.ndjson", payload)
		if err != nil {
			t.Fatal(err)
		}
		if got.ImportID == 0 || got.Duplicate || got.Entries != 5 || got.Mapped != 3 || got.PayParts != 3 || got.Batches != 2 {
			t.Errorf("imported %+v, want import of 5 entries, 3 mapped into 3 pay parts in 2 batches", got)
		}
		if len(got.Problems) != 2 || got.ProblemCount() != 2 ||
			!strings.Contains(got.Problems[0].Error(), "bad-1") || !strings.Contains(got.Problems[1].Error(), "bad-2") {
			t.Errorf("problems %q, want the two bad lines one by one", got.Problems)
		}
		// The same content again takes the import again (it has rejects,
		// whose cause may be fixed since): what landed is already
		// imported, the bad lines are problems again, nothing is paid twice.
		again, err := im.InboxSink().Import(ctx(t), "file", "inbox/hours.ndjson", payload)
		if err != nil || again.Duplicate || again.RetryOf != got.ImportID || again.Duplicates != 3 || again.PayParts != 0 || len(again.Problems) != 2 {
			t.Errorf("the same content again: %+v, %v; want import %d taken again: 3 already imported, 2 problems, no pay part", again, err, got.ImportID)
		}
	})

	t.Run("unreadable file", func(t *testing.T) {
		e := setup(t, sandbox.Options{})
		im := e.importer(t, nil, 10)
		_, err := im.InboxSink().ImportFrom(ctx(t), "file", "inbox/hours.ndjson", &failingReader{r: bytes.NewReader(ndjson(1200, "io")), n: 100_000})
		var re *inbox.ReadError
		if !errors.As(err, &re) || !errors.Is(err, errDisk) || errors.Is(err, inbox.ErrUnavailable) {
			t.Fatalf("err = %v, want an *inbox.ReadError wrapping the disk's error", err)
		}
	})

	t.Run("revoked stops the poll", func(t *testing.T) {
		e := setup(t, sandbox.Options{Rotate: true})
		im := e.importer(t, nil, 2)
		im.AllOrNothing = true
		dir := t.TempDir()
		// Committed before the revocation (the mapper needs no payroll
		// then): importing the files again delivers their open batches.
		for _, name := range []string{"a.ndjson", "b.ndjson"} {
			payload := ndjson(3, name)
			if _, err := im.Plan(ctx(t), "file", "inbox/"+name, payload); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), payload, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		e.sb.RevokeAll()
		im.D = e.deliverer(e.client(t, "stale-token"))
		in, err := inbox.New(inbox.Config{Dir: dir}, im.InboxSink())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Poll(ctx(t)); err != nil { // the files are new: they wait
			t.Fatal(err)
		}
		res, err := in.Poll(ctx(t))
		if !errors.Is(err, inbox.ErrUnavailable) || !errors.Is(err, payroll.ErrRevoked) {
			t.Fatalf("err = %v, want one wrapping inbox.ErrUnavailable and the revocation", err)
		}
		if len(res.Files) != 1 || res.Files[0].Name != "a.ndjson" || res.Files[0].Outcome != inbox.OutcomeError {
			t.Fatalf("files %+v, want a.ndjson failed and b.ndjson not tried", res.Files)
		}
		for _, name := range []string{"a.ndjson", "b.ndjson"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("%s left the inbox: %v", name, err)
			}
		}
		if n := len(e.sandboxParts()); n != 0 {
			t.Fatalf("%d pay parts sent while revoked", n)
		}
	})

	t.Run("policy", func(t *testing.T) {
		e := setup(t, sandbox.Options{})
		for _, tt := range []struct {
			policy       inbox.Policy
			allOrNothing bool
			ok           bool
		}{
			{inbox.AllOrNothing, true, true},
			{inbox.AllOrNothing, false, false},
			{inbox.Partial, false, true},
			{inbox.Partial, true, false},
		} {
			im := e.importer(t, nil, 10)
			im.AllOrNothing = tt.allOrNothing
			_, err := inbox.New(inbox.Config{Dir: t.TempDir(), Policy: tt.policy}, im.InboxSink())
			if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "AllOrNothing")) {
				t.Errorf("policy %s, importer AllOrNothing %v: err = %v", tt.policy, tt.allOrNothing, err)
			}
		}
	})
}
