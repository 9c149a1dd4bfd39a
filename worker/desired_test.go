package worker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/worker"
)

// Helpers for the desired-state model (notes/model.md): intake commits
// entries held, the reconciler (Reconciler.Apply) takes them into their
// groups and records pay parts in batches, the Deliverer sends them.

// reconcilerOf is the reconciler of a message importer's ledger, mapper and
// rules (what the daemon's Correct and Merge hooks run).
func (e *env) reconcilerOf(mi *worker.MessageImporter) *worker.Reconciler {
	return &worker.Reconciler{L: e.led, Mapper: mi.Mapper, Rules: mi.Rules, Wire: mi.Wire, BatchSize: 100}
}

// apply runs rec.Apply for no import in particular and returns the
// batches it recorded (nothing is sent).
func (e *env) apply(t testing.TB, rec *worker.Reconciler) []int64 {
	t.Helper()
	bs, err := rec.Apply(ctx(t), 0)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return bs
}

// liveParts is what the ledger has live for every group (created, or
// pending in a batch still to be sent, not replaced): the actual state, as
// "company|employee|code|units", sorted.
func (e *env) liveParts(t testing.TB) []string {
	t.Helper()
	var out []string
	var after int64
	for {
		gs, err := e.led.Groups(ctx(t), ledger.GroupFilter{Frozen: true, After: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			for _, lp := range g.Live {
				out = append(out, g.Key.Company+"|"+g.Key.Employee+"|"+g.Key.Code+"|"+lp.Units.Decimal.String())
			}
		}
		if len(gs) < 500 {
			break
		}
		after = gs[len(gs)-1].ID
	}
	slices.Sort(out)
	return out
}

// wantLive fails the test unless the ledger's live pay parts are exactly
// want ("company|employee|code|units").
func (e *env) wantLive(t testing.TB, step string, want ...string) {
	t.Helper()
	got := e.liveParts(t)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: the ledger has live %v, want %v", step, got, want)
	}
}

// importSources lists the ledger's imports: every source but the
// reconciler's own (id 0, "reconcile": the source of its batches when no
// import caused them).
func (e *env) importSources(t testing.TB) []ledger.Source {
	t.Helper()
	srcs, err := e.led.ListSources(ctx(t), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(srcs, func(s ledger.Source) bool { return s.ID == 0 })
}
