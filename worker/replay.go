package worker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
)

// ReplayLedger is what a replay needs from the ledger.
type ReplayLedger interface {
	Batch(ctx context.Context, id int64) (ledger.Batch, error)
	Family(ctx context.Context, id int64) ([]ledger.Batch, error)
	Source(ctx context.Context, id int64) (ledger.Source, error)
	SourceReplayOf(ctx context.Context, id int64) (int64, error)
	BatchesOfSource(ctx context.Context, sourceID int64) ([]ledger.Batch, error)
	EntriesOfBatch(ctx context.Context, batchID int64) ([]paysync.Entry, error)
	EntriesOfSource(ctx context.Context, sourceID int64) ([]paysync.Entry, error)
	LiveParts(ctx context.Context, entryIDs []string) ([]ledger.LivePart, error)
	CommitReplay(ctx context.Context, in ledger.ReplayIntent) (ledger.Committed, error)
}

var _ ReplayLedger = (*ledger.Ledger)(nil)

// ErrStillInPayroll refuses a replay that would pay twice.
var ErrStillInPayroll = errors.New("the original's pay parts still exist in payroll")

// ErrRejectedSource is a replay of an import refused as a whole: it has no
// entries in the ledger, only its stored input (see Redrive).
var ErrRejectedSource = errors.New("the import was refused as a whole: its entries were never taken")

// Replayer runs stored entries through the current rules into new batches.
// An entry is in payroll at most once: entries with a live pay part (see
// ledger.LivePart) are not replayed unless forced.
type Replayer struct {
	L         ReplayLedger
	D         *Deliverer
	Mapper    *mapping.Mapper
	Rules     *mapping.Rules
	Wire      mapping.WireChecker
	BatchSize int
}

// LiveSkip counts entries with a live pay part in one batch made by an
// earlier replay.
type LiveSkip struct {
	BatchID int64 `json:"batch"`
	Entries int   `json:"entries"`
	// Pending: the batch is still to be sent (pending, sending or failed),
	// else its pay parts are created and still in payroll.
	Pending bool `json:"pending,omitempty"`
}

// ReplayPlan is what a replay would do.
type ReplayPlan struct {
	SourceID  int64  // the import replayed (0: none known)
	ReplayOf  int64  // the batch replayed (0 for a whole import)
	Name      string // what the replay is, as recorded in the ledger
	Originals []int64
	Entries   int // entries mapped (not live, or forced)
	PayParts  []paysync.PlannedPayPart
	Problems  []error
	Skipped   map[string]int
	// InPayroll lists the entries left out because an earlier replay put
	// them into payroll, or is about to.
	InPayroll []LiveSkip
	// Forced lists, with force, the entries replayed although they are
	// live: they are paid again.
	Forced []LiveSkip
}

// replayTarget is what a replay names: batches, and the entries behind them.
type replayTarget struct {
	of      int64 // the import replayed
	name    string
	named   []ledger.Batch
	entries []paysync.Entry
}

func (t replayTarget) namedSet() map[int64]bool {
	m := make(map[int64]bool, len(t.named))
	for _, b := range t.named {
		m[b.ID] = true
	}
	return m
}

func (t replayTarget) entryIDs() []string {
	ids := make([]string, len(t.entries))
	for i, e := range t.entries {
		ids[i] = e.ID
	}
	return ids
}

// target resolves a batch (with the batches it was split into) or an
// import to its batches and entries. A replay recorded as its own source
// stands for the import it replayed.
func (r *Replayer) target(ctx context.Context, batchID, sourceID int64) (replayTarget, error) {
	var t replayTarget
	if batchID != 0 {
		b, err := r.L.Batch(ctx, batchID)
		if err != nil {
			return t, err
		}
		if t.named, err = r.L.Family(ctx, batchID); err != nil {
			return t, err
		}
		if t.entries, err = r.entriesOf(ctx, t.named); err != nil {
			return t, err
		}
		of, name, err := r.origin(ctx, b.SourceID)
		if err != nil {
			return t, err
		}
		t.of, t.name = of, fmt.Sprintf("batch %d of %s", batchID, name)
		return t, nil
	}
	src, err := r.L.Source(ctx, sourceID)
	if err != nil {
		return t, err
	}
	if src.Status == paysync.SourceRejected {
		return t, fmt.Errorf("import %d: %w", sourceID, ErrRejectedSource)
	}
	bs, err := r.L.BatchesOfSource(ctx, sourceID)
	if err != nil {
		return t, err
	}
	if src.Kind == paysync.SourceReplay {
		t.named = bs
		t.entries, err = r.entriesOf(ctx, bs)
	} else {
		// Replays recorded before they had a source of their own are not
		// the import's own batches.
		for _, b := range bs {
			if b.ReplayOf == 0 {
				t.named = append(t.named, b)
			}
		}
		t.entries, err = r.L.EntriesOfSource(ctx, sourceID)
	}
	if err != nil {
		return t, err
	}
	of, name, err := r.origin(ctx, sourceID)
	t.of, t.name = of, name
	return t, err
}

// origin returns the import a source stands for (a replay's: the import it
// replayed) and how to name it.
func (r *Replayer) origin(ctx context.Context, sourceID int64) (int64, string, error) {
	for range 8 { // a replay's replay_of is never a replay; bounded all the same
		if sourceID == 0 {
			return 0, "no import", nil
		}
		src, err := r.L.Source(ctx, sourceID)
		if err != nil {
			return 0, "", err
		}
		if src.Kind != paysync.SourceReplay {
			return src.ID, fmt.Sprintf("import %d (%s)", src.ID, src.Name), nil
		}
		if sourceID, err = r.L.SourceReplayOf(ctx, sourceID); err != nil {
			return 0, "", err
		}
	}
	return sourceID, fmt.Sprintf("import %d", sourceID), nil
}

// entriesOf returns the entries behind batches, each once.
func (r *Replayer) entriesOf(ctx context.Context, bs []ledger.Batch) ([]paysync.Entry, error) {
	var out []paysync.Entry
	seen := map[string]bool{}
	for _, b := range bs {
		es, err := r.L.EntriesOfBatch(ctx, b.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if !seen[e.ID] {
				seen[e.ID] = true
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// Resume delivers what an earlier replay left open for the entries of a
// batch or an import: its batches still pending or failed (Deliverer.Recover
// first settles those left sending). A replay that was interrupted is thus
// finished, not planned again. It returns the batches it delivered.
func (r *Replayer) Resume(ctx context.Context, batchID, sourceID int64) ([]int64, error) {
	t, err := r.target(ctx, batchID, sourceID)
	if err != nil {
		return nil, err
	}
	live, err := r.L.LiveParts(ctx, t.entryIDs())
	if err != nil {
		return nil, err
	}
	ids := pendingBatches(live, func(lp ledger.LivePart) bool { return lp.Replay })
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, r.D.Deliver(ctx, ids)
}

// pendingBatches returns the batches, in order, that hold the pending pay
// parts among live that keep says.
func pendingBatches(live []ledger.LivePart, keep func(ledger.LivePart) bool) []int64 {
	seen := map[int64]bool{}
	var ids []int64
	for _, lp := range live {
		if lp.State == paysync.PartPending && keep(lp) && !seen[lp.BatchID] {
			seen[lp.BatchID] = true
			ids = append(ids, lp.BatchID)
		}
	}
	slices.Sort(ids)
	return ids
}

// Plan maps the stored entries of a batch (batchID, with the batches it
// was split into) or of a whole import (sourceID) with the current rules,
// leaving out those in payroll through an earlier replay. It refuses while
// the named batches are unfinished, or the entries' pay parts in them (or
// in any batch not made by a replay) still exist in payroll. force replays
// every entry all the same.
func (r *Replayer) Plan(ctx context.Context, batchID, sourceID int64, force bool) (ReplayPlan, error) {
	plan := ReplayPlan{ReplayOf: batchID, Skipped: map[string]int{}}
	t, err := r.target(ctx, batchID, sourceID)
	if err != nil {
		return plan, err
	}
	plan.SourceID, plan.Name = t.of, t.name
	for _, b := range t.named {
		plan.Originals = append(plan.Originals, b.ID)
		switch b.State {
		case paysync.BatchPending, paysync.BatchSending, paysync.BatchFailed, paysync.BatchReverting:
			if !force {
				return plan, fmt.Errorf("batch %d is %s: let it finish (or revert it) before replaying", b.ID, b.State)
			}
		}
	}
	live, err := r.verified(ctx, t.entryIDs())
	if err != nil {
		return plan, err
	}
	byEntry := map[string][]ledger.LivePart{}
	for _, lp := range live {
		byEntry[lp.EntryID] = append(byEntry[lp.EntryID], lp)
	}
	named := t.namedSet()
	skipped, forced := map[int64]*LiveSkip{}, map[int64]*LiveSkip{}
	var blocking []ledger.LivePart
	var todo []paysync.Entry
	for _, e := range t.entries {
		lps := byEntry[e.ID]
		switch {
		case len(lps) == 0:
			todo = append(todo, e)
		case force:
			todo = append(todo, e)
			count(forced, lps[0])
		default:
			// Live in a batch named or not made by a replay: the operator
			// must revert it first. Live only in an earlier replay: done.
			n := len(blocking)
			for _, lp := range lps {
				if !lp.Replay || named[lp.BatchID] {
					blocking = append(blocking, lp)
				}
			}
			if len(blocking) == n {
				count(skipped, lps[0])
			}
		}
	}
	if len(blocking) > 0 {
		return plan, refusal(blocking, live)
	}
	plan.InPayroll, plan.Forced = sortedSkips(skipped), sortedSkips(forced)
	plan.Entries = len(todo)
	// The stored entries go through the same step as any source's, but
	// for dedupe: the live-entry rules above decided which are taken.
	rep := Report{Skipped: plan.Skipped}
	in := &ledger.ImportIntent{}
	s := newSourceIntake(entryStep{mapper: r.Mapper}, in, r.Rules, r.Wire, &rep, false, math.MaxInt)
	for _, e := range todo {
		out, err := mapEntry(ctx, r.Mapper, e)
		if err != nil {
			return plan, err
		}
		if err := s.record(out); err != nil {
			return plan, err
		}
	}
	s.finish()
	plan.PayParts, plan.Problems = in.PayParts, rep.Problems
	return plan, nil
}

func count(m map[int64]*LiveSkip, lp ledger.LivePart) {
	s := m[lp.BatchID]
	if s == nil {
		s = &LiveSkip{BatchID: lp.BatchID, Pending: lp.State == paysync.PartPending}
		m[lp.BatchID] = s
	}
	s.Entries++
}

func sortedSkips(m map[int64]*LiveSkip) []LiveSkip {
	var out []LiveSkip
	for _, s := range m {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b LiveSkip) int { return cmp.Compare(a.BatchID, b.BatchID) })
	return out
}

// refusal says why a replay would pay twice, naming the first batch that
// stands in the way.
func refusal(blocking, live []ledger.LivePart) error {
	first := slices.MinFunc(blocking, func(a, b ledger.LivePart) int { return cmp.Compare(a.BatchID, b.BatchID) })
	batches := map[int64]bool{}
	for _, lp := range blocking {
		batches[lp.BatchID] = true
	}
	more := ""
	if len(batches) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(batches)-1)
	}
	if first.State == paysync.PartPending {
		return fmt.Errorf("batch %d%s still has pay parts of these entries to send: let it finish (or revert it) before replaying, or replay with --force to pay again", first.BatchID, more)
	}
	// Only the first batch's pay parts are counted: the message names it.
	parts := map[int64]bool{} // a pay part of several entries is live once
	for _, lp := range live {
		if lp.BatchID == first.BatchID {
			parts[lp.PayPartID] = true
		}
	}
	return fmt.Errorf("batch %d%s: %d of its pay parts: %w; revert it first (paysync revert %d), or replay with --force to pay again", first.BatchID, more, len(parts), ErrStillInPayroll, first.BatchID)
}

// verified returns the live pay parts of the entries, leaving out created
// ones that payroll no longer has (deleted by hand).
func (r *Replayer) verified(ctx context.Context, entryIDs []string) ([]ledger.LivePart, error) {
	live, err := r.L.LiveParts(ctx, entryIDs)
	if err != nil {
		return nil, err
	}
	exists := map[string]map[string]bool{}
	out := live[:0]
	for _, lp := range live {
		if lp.State == paysync.PartCreated {
			ids, ok := exists[lp.CompanyID]
			if !ok {
				current, err := r.D.P.PayParts(ctx, lp.CompanyID)
				if err != nil {
					return nil, fmt.Errorf("read pay parts of company %s: %w", lp.CompanyID, err)
				}
				ids = make(map[string]bool, len(current))
				for _, p := range current {
					ids[p.ID] = true
				}
				exists[lp.CompanyID] = ids
			}
			if !ids[lp.PayrollID] {
				continue
			}
		}
		out = append(out, lp)
	}
	return out, nil
}

// Commit stores a plan's pay parts as a replay, in new batches linked to
// the batch replayed, without sending them.
func (r *Replayer) Commit(ctx context.Context, plan ReplayPlan) ([]int64, error) {
	if len(plan.PayParts) == 0 {
		return nil, nil
	}
	c, err := r.L.CommitReplay(ctx, ledger.ReplayIntent{Of: plan.SourceID, Batch: plan.ReplayOf, Name: plan.Name,
		Entries: plan.Entries, PayParts: plan.PayParts, BatchSize: r.BatchSize})
	return c.BatchIDs, err
}

// Run commits a plan as new batches linked to the original and delivers them.
func (r *Replayer) Run(ctx context.Context, plan ReplayPlan) ([]int64, error) {
	ids, err := r.Commit(ctx, plan)
	if err != nil || len(ids) == 0 {
		return ids, err
	}
	return ids, r.D.Deliver(ctx, ids)
}

// RedriveLedger is what a re-drive needs from the ledger beyond an import.
type RedriveLedger interface {
	CopySourcePayload(ctx context.Context, id int64, w io.Writer) (int64, error)
	LinkReplay(ctx context.Context, id, of int64) error
}

// RedriveMessageLedger is what a message's re-drive needs from the ledger.
type RedriveMessageLedger interface {
	RedriveLedger
	EntriesOfSource(ctx context.Context, sourceID int64) ([]paysync.Entry, error)
	LiveParts(ctx context.Context, entryIDs []string) ([]ledger.LivePart, error)
	SealBatches(ctx context.Context, ids []int64) error
}

// Redrive imports the stored input of a source refused as a whole again
// through im (with its kind, name and format, all or nothing as before):
// once its cause is fixed, it becomes a new import, linked to the refused
// one (replay_of), and is delivered. Run again, the same content is found
// imported and only what it left open is delivered. With preview set,
// nothing is committed or sent (Importer.PreviewFrom).
func Redrive(ctx context.Context, l RedriveLedger, im *Importer, src ledger.Source, preview func(paysync.PlannedPayPart) error) (Report, error) {
	f, err := os.CreateTemp("", "paysync-redrive-*")
	if err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := l.CopySourcePayload(ctx, src.ID, f); err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	again := *im
	again.Read.Format = mapping.Format(src.Format)
	again.AllOrNothing, again.Accumulate = true, false
	if preview != nil {
		return again.PreviewFrom(ctx, src.Kind, src.Name, f, preview)
	}
	rep, err := again.PlanFrom(ctx, src.Kind, src.Name, f)
	if err != nil {
		return rep, err
	}
	if err := linkRedrive(ctx, l, rep, src.ID); err != nil || rep.ImportID == 0 {
		return rep, err
	}
	n, err := im.deliverOpen(ctx, rep.ImportID)
	if rep.Duplicate {
		rep.Resumed = n
	}
	return rep, err
}

// linkRedrive records that what a re-drive became (an import, or a source
// refused again) re-drives source of.
func linkRedrive(ctx context.Context, l RedriveLedger, rep Report, of int64) error {
	for _, id := range []int64{rep.ImportID, rep.RejectedAs} {
		if id != 0 {
			if err := l.LinkReplay(ctx, id, of); err != nil {
				return err
			}
		}
	}
	return nil
}

// RedriveMessage takes a streaming message refused as a whole (or dead
// lettered and recorded so) again through mi, exactly as the daemon takes
// messages: addressed to company (NATS: the subject's), all or nothing.
// Its pay parts join their company's open batch, which is sealed and
// delivered now, as is whatever an earlier re-drive of it left unsent.
// With preview set, the message is planned the same way and its pay parts
// handed to preview; nothing is committed or sent.
func RedriveMessage(ctx context.Context, l RedriveMessageLedger, mi *MessageImporter, d *Deliverer, src ledger.Source, company string, preview func(paysync.PlannedPayPart) error) (Report, error) {
	var payload bytes.Buffer
	if _, err := l.CopySourcePayload(ctx, src.ID, &payload); err != nil {
		return Report{}, fmt.Errorf("re-drive import %d: %w", src.ID, err)
	}
	m := Message{Kind: src.Kind, Name: src.Name, Company: company, Payload: payload.Bytes(), Received: time.Now()}
	again := *mi
	if preview != nil {
		again.L = previewLedger{MessageLedger: mi.L, fn: preview}
	}
	reps, errs, err := again.Plan(ctx, []Message{m})
	if err != nil {
		return Report{}, err
	}
	rep := reps[0]
	if errs[0] != nil || preview != nil {
		return rep, errs[0]
	}
	if err := linkRedrive(ctx, l, rep, src.ID); err != nil || rep.ImportID == 0 {
		return rep, err
	}
	// Its pay parts, in whichever batches they went to.
	es, err := l.EntriesOfSource(ctx, rep.ImportID)
	if err != nil {
		return rep, err
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	live, err := l.LiveParts(ctx, ids)
	if err != nil {
		return rep, err
	}
	batches := pendingBatches(live, func(ledger.LivePart) bool { return true })
	rep.Batches = batches
	if len(batches) == 0 {
		return rep, nil
	}
	if err := l.SealBatches(ctx, batches); err != nil {
		return rep, err
	}
	return rep, d.Deliver(ctx, batches)
}

// previewLedger commits nothing: it hands the pay parts of the intents
// that would be committed to fn.
type previewLedger struct {
	MessageLedger
	fn func(paysync.PlannedPayPart) error
}

func (p previewLedger) CommitImports(ctx context.Context, ins []ledger.ImportIntent) ([]ledger.Committed, []error, error) {
	for _, in := range ins {
		if in.Rejected {
			continue
		}
		for _, pp := range in.PayParts {
			if err := p.fn(pp); err != nil {
				return nil, nil, err
			}
		}
	}
	return make([]ledger.Committed, len(ins)), make([]error, len(ins)), nil
}
