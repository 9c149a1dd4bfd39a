package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker"
)

// maxStdinBytes bounds an import from standard input. Files are not
// bounded: they are read as they are imported, in memory that does not
// grow with their size.
const maxStdinBytes = 256 << 20

// errStdinTooLarge is standard input beyond maxStdinBytes.
var errStdinTooLarge = errors.New("larger than 256 MiB: split the export")

// progress draws a one-line progress bar on a terminal, nothing elsewhere.
type progress struct {
	w     io.Writer
	on    bool
	total int
	last  time.Time
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		p.on = isTerminal(f)
	}
	return p
}

func (p *progress) update(done int) {
	if !p.on || (time.Since(p.last) < 100*time.Millisecond && done < p.total) {
		return
	}
	p.last = time.Now()
	width := 30
	filled := width
	if p.total > 0 {
		filled = min(width, done*width/p.total)
	}
	fmt.Fprintf(p.w, "\rsending [%-*s] %d/%d pay parts", width, string(repeat('#', filled)), done, p.total)
}

// add counts the pending pay parts of batches about to be sent.
func (p *progress) add(open []ledger.Batch) {
	for _, b := range open {
		p.total += b.Pending
	}
}

func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func repeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// deliverer wires the worker to this session.
func (s *session) deliverer(io stdio) *worker.Deliverer {
	return &worker.Deliverer{L: s.led, P: s.cl, Log: s.cfg.logger(io.err), DeleteChunk: s.cfg.BatchSize}
}

type sendSummary struct {
	Imports  []worker.Report `json:"imports"`
	Problems []problemJSON   `json:"problems"`
	// ProblemsOmitted counts problems beyond those listed (every one is a
	// reject of its import: paysync imports show ID).
	ProblemsOmitted int   `json:"problems_omitted,omitempty"`
	Created         int   `json:"pay_parts_created"`
	Reconciled      int   `json:"pay_parts_reconciled"`
	Rejected        int   `json:"pay_parts_rejected"`
	Batches         int   `json:"batches"`
	Unfinished      int   `json:"batches_unfinished"`
	APICalls        int64 `json:"api_calls"`
}

// sendImport imports files for real: intent first, then delivery
// (worker.Importer.ImportAll).
func sendImport(ctx context.Context, s *session, rules *mapping.Rules, files []string, opts mapping.ReadOptions, scope importScope, asJSON bool, io stdio) error {
	// The start-up reads wait out a short payroll outage (429, 5xx, token
	// endpoint), up to PAYSYNC_STARTUP_TIMEOUT in all; whatever an earlier
	// run left in flight is settled before new work, and the batches it
	// left open are delivered first.
	d := s.deliverer(io)
	prog := newProgress(io.err)
	d.OnProgress = prog.update
	defer prog.done()
	mapper, schema, err := worker.Begin(ctx, s.commandWaiter(io.err), s.cl, rules, s.cfg.CompanyID, d)
	if err != nil {
		return s.startupErr(err)
	}
	im := &worker.Importer{L: s.led, D: d, Mapper: mapper, Rules: rules, Wire: schema, Read: opts, BatchSize: s.cfg.BatchSize}
	scope.apply(im)
	// Corrections an earlier run recorded but did not apply are applied
	// first, and delivered with its other leftovers.
	if _, err := im.Reconciler().Apply(ctx, 0); err != nil {
		return err
	}
	if _, err := d.DeliverOpen(ctx, 0, func(open []ledger.Batch) {
		prog.add(open)
		fmt.Fprintf(io.err, "paysync: finishing %s left open by an earlier run\n", plural(len(open), "batch", "batches"))
	}); err != nil {
		return err
	}
	res, runErr := im.ImportAll(ctx, s.led, inputsOf(files, io.in), prog.add)
	prog.done()
	sum := sendSummary{Batches: res.Batches, Unfinished: res.Unfinished, Problems: []problemJSON{}}
	for i, r := range res.Inputs {
		if r.Unreadable != nil {
			sum.Problems = append(sum.Problems, unreadableProblem(files[i], r.Unreadable)...)
			continue
		}
		sum.ProblemsOmitted += r.Report.ProblemsOmitted
		for _, p := range r.Report.ProblemList() {
			sum.Problems = append(sum.Problems, toProblemJSON(p)...)
		}
		sum.Imports = append(sum.Imports, r.Report)
	}
	sum.Created, sum.Reconciled, sum.Rejected = d.Stats.Created, d.Stats.Reconciled, d.Stats.Rejected
	sum.APICalls = s.cl.Calls()
	if asJSON {
		if err := writeJSON(io.out, sum); err != nil {
			return err
		}
	} else {
		writeSendSummary(io.out, sum)
	}
	switch {
	case runErr != nil:
		return runErr
	case len(sum.Problems) > 0:
		return fmt.Errorf("import: %s; the good entries were sent, the rest is recorded as rejects (paysync imports show ID)", plural(len(sum.Problems)+sum.ProblemsOmitted, "problem", "problems"))
	case sum.Unfinished > 0:
		return fmt.Errorf("import: %s not finish; they stay pending and are retried on the next run (paysync batches --state failed)", plural(sum.Unfinished, "batch did", "batches did"))
	}
	return nil
}

// inputsOf are the files to import, "-" standard input (at most
// maxStdinBytes of it).
func inputsOf(files []string, stdin io.Reader) []worker.Input {
	inputs := make([]worker.Input, len(files))
	for i, name := range files {
		if name == "-" {
			inputs[i] = worker.Input{Kind: paysync.SourceStdin, Name: "stdin", Open: func() (io.ReadCloser, error) {
				return io.NopCloser(&cappedReader{r: stdin, n: maxStdinBytes}), nil
			}}
			continue
		}
		inputs[i] = worker.Input{Kind: paysync.SourceFile, Name: name, Open: func() (io.ReadCloser, error) { return os.Open(name) }}
	}
	return inputs
}

// unreadableProblem is an input that could not be opened or read (nothing
// of it committed), named as on the command line: what is wrong.
func unreadableProblem(name string, err error) []problemJSON {
	msg := fmt.Sprintf("cannot open: %v", unwrapPath(err))
	var ie *worker.InputError
	switch {
	case errors.Is(err, errStdinTooLarge):
		msg = errStdinTooLarge.Error()
	case errors.As(err, &ie):
		msg = fmt.Sprintf("read: %v", ie.Err)
	}
	return toProblemJSON(&mapping.Problem{Source: name, Msg: msg, Hint: "check the path"})
}

// cappedReader reads at most n bytes of r, then fails with errStdinTooLarge.
type cappedReader struct {
	r io.Reader
	n int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.n < 0 {
		return 0, errStdinTooLarge
	}
	if int64(len(p)) > c.n+1 {
		p = p[:c.n+1]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if c.n < 0 {
		return n, errStdinTooLarge
	}
	return n, err
}

func writeSendSummary(w io.Writer, sum sendSummary) {
	for _, r := range sum.Imports {
		if r.Duplicate && r.Resumed > 0 {
			fmt.Fprintf(w, "%s: already imported as import %d on %s; finished %s left open by an earlier run\n", r.Source, r.ImportID, r.ImportedAt, plural(r.Resumed, "batch", "batches"))
			continue
		}
		if r.Duplicate {
			fmt.Fprintf(w, "%s: already imported as import %d on %s: nothing sent (duplicate)\n", r.Source, r.ImportID, r.ImportedAt)
			continue
		}
		if r.RetryOf != 0 {
			fmt.Fprintf(w, "%s: the same content as import %d, which had rejects: import %d takes import %d again (what landed then counts as duplicates)\n",
				r.Source, r.RetryOf, r.ImportID, r.RetryOf)
		}
		fmt.Fprintf(w, "%s: import %d: %s, %s, %d skipped; %s in batches %v\n",
			r.Source, r.ImportID, plural(r.Entries, "entry", "entries"), plural(r.Duplicates, "duplicate", "duplicates"), countSkipped(r.Skipped), plural(r.PayParts, "pay part", "pay parts"), r.Batches)
		if r.Corrections+r.Removed > 0 {
			fmt.Fprintf(w, "%s: %s changed since paid, %s no longer in the statement: their pay parts replaced (paysync corrections --import %d)\n",
				r.Source, plural(r.Corrections, "entry", "entries"), plural(r.Removed, "entry", "entries"), r.ImportID)
		}
		for _, wa := range r.Warnings {
			fmt.Fprintf(w, "warning: %s\n", wa)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
		if r.Outside > len(r.Warnings) {
			fmt.Fprintf(w, "warning: … and %s outside the period, not imported\n", plural(r.Outside-len(r.Warnings), "more row", "more rows"))
		}
	}
	fmt.Fprintf(w, "\nsummary: %s created (%d found by reconciliation), %d rejected by payroll, %s, %s (%d unfinished), %s\n",
		plural(sum.Created, "pay part", "pay parts"), sum.Reconciled, sum.Rejected, plural(len(sum.Problems)+sum.ProblemsOmitted, "problem", "problems"),
		plural(sum.Batches, "batch", "batches"), sum.Unfinished, plural(sum.APICalls, "API call", "API calls"))
	if len(sum.Problems) > 0 {
		fmt.Fprintf(w, "\nproblems (%d):\n", len(sum.Problems)+sum.ProblemsOmitted)
		for _, p := range sum.Problems {
			fmt.Fprintf(w, "  %s\n", p.Text)
		}
		if sum.ProblemsOmitted > 0 {
			fmt.Fprintf(w, "  … and %d more, not listed here: paysync imports show ID lists them all\n", sum.ProblemsOmitted)
		}
	}
}

func countSkipped(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
