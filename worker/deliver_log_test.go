package worker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// recordLog keeps the records a logger handles, with their attributes as
// slog values (kinds included).
type recordLog struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func (r *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recordLog) WithGroup(string) slog.Handler            { return r }
func (r *recordLog) Handle(_ context.Context, rec slog.Record) error {
	lr := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]slog.Value{}}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, lr)
	return nil
}

func (r *recordLog) at(level slog.Level) []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, rec := range r.recs {
		if rec.level == level {
			out = append(out, rec)
		}
	}
	return out
}

// Issue 16: the daemon logged nothing per delivered batch. Each batch
// created in payroll is one info line naming the company, the batch, its
// pay parts and how long the create call took (a duration); the pay
// parts themselves are not logged.
func TestDeliverer_LogsEachCreatedBatch(t *testing.T) {
	e := setup(t, sandbox.Options{})
	rep, err := e.importer(t, nil, 5).Plan(ctx(t), "file", "logged.ndjson", ndjson(12, "logged"))
	if err != nil || len(rep.Batches) != 3 {
		t.Fatalf("plan: %v, batches %v", err, rep.Batches)
	}
	logs := &recordLog{}
	d := &worker.Deliverer{L: e.led, P: e.cl, Sleep: noSleep, MaxAttempts: 20, Log: slog.New(logs)}
	if err := d.Deliver(ctx(t), rep.Batches); err != nil {
		t.Fatal(err)
	}
	infos := logs.at(slog.LevelInfo)
	if len(infos) != len(rep.Batches) {
		t.Fatalf("%d info lines, want one per batch (%d): %+v", len(infos), len(rep.Batches), infos)
	}
	wantParts := map[int64]int64{rep.Batches[0]: 5, rep.Batches[1]: 5, rep.Batches[2]: 2}
	for i, rec := range infos {
		if rec.msg != "batch created" {
			t.Errorf("line %d: message %q, want %q", i, rec.msg, "batch created")
		}
		if c := rec.attrs["company"]; c.String() != sandbox.CompanyNordlys {
			t.Errorf("line %d: company %v, want %s", i, c, sandbox.CompanyNordlys)
		}
		id := rec.attrs["batch"]
		if id.Kind() != slog.KindInt64 || id.Int64() != rep.Batches[i] {
			t.Errorf("line %d: batch %v, want %d", i, id, rep.Batches[i])
			continue
		}
		if n := rec.attrs["pay_parts"]; n.Kind() != slog.KindInt64 || n.Int64() != wantParts[id.Int64()] {
			t.Errorf("line %d: pay_parts %v, want %d", i, n, wantParts[id.Int64()])
		}
		if took, ok := rec.attrs["took"]; !ok || took.Kind() != slog.KindDuration || took.Duration() <= 0 {
			t.Errorf("line %d: took %v (kind %v), want the call's duration as a duration", i, took, took.Kind())
		}
	}
}
