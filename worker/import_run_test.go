package worker_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// fileInput writes payload to a file named name in a temporary folder and
// returns it as an input.
func fileInput(t testing.TB, name string, payload []byte) worker.Input {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	return worker.Input{Kind: paysync.SourceFile, Name: path, Open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// readerInput is an input read from r once (standard input, a pipe).
func readerInput(name string, r io.Reader) worker.Input {
	return worker.Input{Kind: paysync.SourceStdin, Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(r), nil }}
}

// TestImporter_ImportAll: a one-shot import takes its inputs one after the
// other, sends each one's batches, reports an input it cannot open or read
// and goes on, and counts the batches that still owe work.
func TestImporter_ImportAll(t *testing.T) {
	a, b := ndjson(25, "a"), ndjson(12, "b")
	type run struct {
		e     *env
		im    *worker.Importer
		sum   worker.ImportSummary
		err   error
		found int // batches found was told of
	}
	tests := []struct {
		name   string
		opts   sandbox.Options
		inputs func(t *testing.T, e *env, im *worker.Importer, cancel context.CancelFunc) []worker.Input
		check  func(t *testing.T, r run)
	}{
		{"every input imported and sent", sandbox.Options{}, func(t *testing.T, _ *env, _ *worker.Importer, _ context.CancelFunc) []worker.Input {
			return []worker.Input{fileInput(t, "a.ndjson", a), readerInput("stdin", bytes.NewReader(b))}
		}, func(t *testing.T, r run) {
			if r.err != nil || len(r.sum.Inputs) != 2 || r.sum.Batches != 5 || r.sum.Unfinished != 0 || r.found != 5 {
				t.Fatalf("ImportAll = %+v, %v; found %d", r.sum, r.err, r.found)
			}
			for i, want := range []int{25, 12} {
				rep := r.sum.Inputs[i].Report
				if r.sum.Inputs[i].Unreadable != nil || rep.ImportID == 0 || rep.PayParts != want || len(rep.Batches) != (want+9)/10 {
					t.Errorf("input %d: %+v, unreadable %v", i, rep, r.sum.Inputs[i].Unreadable)
				}
			}
			if n := len(r.e.sandboxParts()); n != 37 {
				t.Errorf("payroll holds %d pay parts, want 37", n)
			}
		}},
		{"an input that cannot be opened or read is reported, the others go on", sandbox.Options{}, func(t *testing.T, _ *env, _ *worker.Importer, _ context.CancelFunc) []worker.Input {
			missing := filepath.Join(t.TempDir(), "missing.ndjson")
			return []worker.Input{
				{Kind: paysync.SourceFile, Name: missing, Open: func() (io.ReadCloser, error) { return os.Open(missing) }},
				readerInput("stdin", &failingReader{r: bytes.NewReader(b), n: 300}),
				fileInput(t, "a.ndjson", a),
			}
		}, func(t *testing.T, r run) {
			if r.err != nil || len(r.sum.Inputs) != 3 || r.sum.Batches != 3 || r.sum.Unfinished != 0 {
				t.Fatalf("ImportAll = %+v, %v", r.sum, r.err)
			}
			var ie *worker.InputError
			if u := r.sum.Inputs[0].Unreadable; !errors.Is(u, fs.ErrNotExist) {
				t.Errorf("missing file: unreadable %v, want not exist", u)
			}
			if u := r.sum.Inputs[1].Unreadable; !errors.As(u, &ie) || !errors.Is(u, errDisk) {
				t.Errorf("failing read: unreadable %v, want an InputError", u)
			}
			in := r.sum.Inputs[2]
			if in.Unreadable != nil || in.Report.PayParts != 25 {
				t.Errorf("good file: %+v", in)
			}
			// (The reconciler's own source, id 0, is no import.)
			if srcs := r.e.importSources(t); len(srcs) != 1 || srcs[0].ID != in.Report.ImportID {
				t.Errorf("the ledger holds imports %+v, want only the good file's", srcs)
			}
		}},
		{"the same content again sends nothing", sandbox.Options{}, func(t *testing.T, _ *env, _ *worker.Importer, _ context.CancelFunc) []worker.Input {
			in := fileInput(t, "a.ndjson", a)
			return []worker.Input{in, in}
		}, func(t *testing.T, r run) {
			first, again := r.sum.Inputs[0].Report, r.sum.Inputs[1].Report
			if r.err != nil || !again.Duplicate || again.ImportID != first.ImportID || again.Resumed != 0 || len(again.Batches) != 3 {
				t.Fatalf("again: %+v, %v", again, r.err)
			}
			if n := len(r.e.sandboxParts()); n != 25 {
				t.Errorf("payroll holds %d pay parts, want 25", n)
			}
		}},
		{"batches an earlier run left open are sent with the same content", sandbox.Options{}, func(t *testing.T, _ *env, im *worker.Importer, _ context.CancelFunc) []worker.Input {
			in := fileInput(t, "a.ndjson", a)
			f, err := in.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if rep, err := im.PlanFrom(ctx(t), in.Kind, in.Name, f); err != nil || rep.ImportID == 0 { // committed, not sent: a crash
				t.Fatalf("plan: %+v, %v", rep, err)
			}
			return []worker.Input{in}
		}, func(t *testing.T, r run) {
			rep := r.sum.Inputs[0].Report
			if r.err != nil || !rep.Duplicate || rep.Resumed != 3 || r.sum.Unfinished != 0 || r.found != 3 {
				t.Fatalf("ImportAll = %+v, %v", r.sum, r.err)
			}
			if n := len(r.e.sandboxParts()); n != 25 {
				t.Errorf("payroll holds %d pay parts, want 25", n)
			}
		}},
		{"batches payroll does not take are unfinished", sandbox.Options{Faults: []sandbox.Fault{{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503}}},
			func(t *testing.T, _ *env, _ *worker.Importer, _ context.CancelFunc) []worker.Input {
				return []worker.Input{fileInput(t, "b.ndjson", b)}
			}, func(t *testing.T, r run) {
				if r.err != nil || r.sum.Batches != 2 || r.sum.Unfinished != 2 {
					t.Fatalf("ImportAll = %+v, %v", r.sum, r.err)
				}
				for _, id := range r.sum.Inputs[0].Report.Batches {
					if st := batchState(t, r.e, id); st != paysync.BatchFailed {
						t.Errorf("batch %d is %s, want failed", id, st)
					}
				}
			}},
		{"an error stops the run before the next input", sandbox.Options{}, func(t *testing.T, _ *env, _ *worker.Importer, cancel context.CancelFunc) []worker.Input {
			second := fileInput(t, "b.ndjson", b)
			open := second.Open
			second.Open = func() (io.ReadCloser, error) { cancel(); return open() } // the ledger cannot be used now
			return []worker.Input{fileInput(t, "a.ndjson", a), second, {Kind: paysync.SourceFile, Name: "never", Open: func() (io.ReadCloser, error) {
				t.Error("the input after the error was opened")
				return nil, errors.New("never")
			}}}
		}, func(t *testing.T, r run) {
			if !errors.Is(r.err, context.Canceled) || len(r.sum.Inputs) != 1 || r.sum.Inputs[0].Report.PayParts != 25 {
				t.Fatalf("ImportAll = %+v, %v; want the first input and context.Canceled", r.sum, r.err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.opts)
			im := e.importer(t, nil, 10)
			c, cancel := context.WithCancel(ctx(t))
			defer cancel()
			r := run{e: e, im: im}
			inputs := tt.inputs(t, e, im, cancel)
			r.sum, r.err = im.ImportAll(c, e.led, inputs, func(open []ledger.Batch) { r.found += len(open) })
			tt.check(t, r)
		})
	}
}
