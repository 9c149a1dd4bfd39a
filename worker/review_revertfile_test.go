package worker_test

import (
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// TestRevert_FileAfterMerge: a file import's aggregate that a merge joined
// with streamed entries is reverted by revert --import of the file where
// its entries are paid now: the merged pay part is replaced by the
// streamed entries' total (its batches alone hold nothing any more: the
// revert deleted nothing and the file's hours stayed paid).
func TestRevert_FileAfterMerge(t *testing.T) {
	m := newMergeEnv(t)
	rules := mapping.DefaultRules()
	im := m.importer(t, rules, 100)
	rep, err := im.Import(ctx(t), paysync.SourceFile, "a.json", []byte(`[`+entryJSON("f1", sandbox.EmpMetteHansen, "T1", "8")+`]`))
	if err != nil {
		t.Fatal(err)
	}
	m.holds(t, "file", sandbox.EmpMetteHansen+"|T1|8")
	m.send(t, entryJSON("n1", sandbox.EmpMetteHansen, "T1", "2"))
	m.merge(t)
	m.holds(t, "merged", sandbox.EmpMetteHansen+"|T1|10")
	tg, err := worker.RevertTargetOf(ctx(t), m.led, 0, rep.ImportID)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Scope == nil {
		t.Fatalf("revert --import %d of a file whose pay part a merge replaced: batches %+v, want its entries reverted wherever they are", rep.ImportID, tg.Batches)
	}
	if _, err := m.corr.RevertScope(ctx(t), *tg.Scope, false); err != nil {
		t.Fatal(err)
	}
	if err := m.pipe.Flush(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	m.holds(t, "after revert --import of the file", sandbox.EmpMetteHansen+"|T1|2")
}
