package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// Operators' reads of correction units (ApplyCorrection records them): a
// unit is seen as one thing, the import that brought it, the entries it
// changed (before and after) and the pay parts it replaced and created.

// CorrectionFilter selects correction units for operators.
type CorrectionFilter struct {
	SourceID  int64     // the import that brought them (0: any)
	CompanyID string    // "" = any
	Since     time.Time // zero = any
}

// CorrectionState is where a correction unit is as a whole.
type CorrectionState string

// Correction unit states.
const (
	// CorrectionPending: payroll still holds a pay part it replaces, or a
	// pay part it creates is not created yet.
	CorrectionPending CorrectionState = "pending"
	// CorrectionFailed: a batch of it failed; the next run sends it again.
	CorrectionFailed CorrectionState = "failed"
	// CorrectionDone: what it replaces is gone from payroll and what it
	// creates was sent.
	CorrectionDone CorrectionState = "done"
)

// CorrectionUnit is one correction unit: the corrected entries one import
// brought, applied together.
type CorrectionUnit struct {
	ID         int64  `json:"id"`
	SourceID   int64  `json:"import_id"`
	ImportName string `json:"import_name"`
	CompanyID  string `json:"company_id"`
	Entries    int    `json:"entries"`  // entries corrected
	Replaced   int    `json:"replaced"` // pay parts replaced
	// ToDelete counts the replaced pay parts payroll still holds (deleted
	// before the unit's batches send anything).
	ToDelete int `json:"to_delete"`
	New      int `json:"new"` // pay parts created instead
	// NotSent counts the new pay parts not created yet; Rejected those
	// payroll refused.
	NotSent   int             `json:"not_sent"`
	Rejected  int             `json:"rejected"`
	Batches   []int64         `json:"batches"` // the unit's batches (and batches split from them)
	State     CorrectionState `json:"state"`
	CreatedAt time.Time       `json:"created_at"`
}

// ListCorrections lists correction units, newest first.
func (l *Ledger) ListCorrections(ctx context.Context, f CorrectionFilter) ([]CorrectionUnit, error) {
	var where []string
	var args []any
	if f.SourceID != 0 {
		where = append(where, "c.source_id = ?")
		args = append(args, f.SourceID)
	}
	if f.CompanyID != "" {
		where = append(where, "c.company_id = ?")
		args = append(args, f.CompanyID)
	}
	if !f.Since.IsZero() {
		where = append(where, "c.created_at >= ?")
		args = append(args, f.Since.UTC().Format(tsLayout))
	}
	q := ""
	if len(where) > 0 {
		q = "WHERE " + strings.Join(where, " AND ")
	}
	us, err := l.queryCorrections(ctx, q+" ORDER BY c.id DESC", args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: list corrections: %w", err)
	}
	return us, nil
}

// Correction returns one correction unit.
func (l *Ledger) Correction(ctx context.Context, id int64) (CorrectionUnit, error) {
	us, err := l.queryCorrections(ctx, "WHERE c.id = ?", id)
	if err != nil {
		return CorrectionUnit{}, fmt.Errorf("ledger: correction %d: %w", id, err)
	}
	if len(us) == 0 {
		return CorrectionUnit{}, fmt.Errorf("ledger: correction %d: %w", id, ErrNotFound)
	}
	return us[0], nil
}

// queryCorrections reads the units where selects, with their batches.
func (l *Ledger) queryCorrections(ctx context.Context, where string, args ...any) ([]CorrectionUnit, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT c.id, c.source_id, s.name, c.company_id, c.entries, c.superseded, c.created_at,
			(SELECT count(*) FROM pay_parts p WHERE p.superseded_by = c.id AND p.state = 'created')
		FROM corrections c JOIN sources s ON s.id = c.source_id `+where, args...)
	if err != nil {
		return nil, err
	}
	var out []CorrectionUnit
	for rows.Next() {
		var u CorrectionUnit
		var at string
		if err := rows.Scan(&u.ID, &u.SourceID, &u.ImportName, &u.CompanyID, &u.Entries, &u.Replaced, &at, &u.ToDelete); err != nil {
			rows.Close()
			return nil, err
		}
		u.CreatedAt = parseTS(at)
		u.Batches = []int64{}
		out = append(out, u)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	byID := make(map[int64]*CorrectionUnit, len(out))
	keys := make([]string, len(out))
	for i := range out {
		byID[out[i].ID] = &out[i]
		keys[i] = fmt.Sprint(out[i].ID)
	}
	failed := map[int64]bool{}
	err = queryIn(ctx, l.rdb, keys, func(in string) string {
		// A batch split after an attempt moves its pay parts into
		// children that do not carry correction_id: follow parent_id.
		return `WITH RECURSIVE ub(unit, id, state) AS (
				SELECT correction_id, id, state FROM batches WHERE correction_id IN (` + in + `)
				UNION ALL SELECT ub.unit, b.id, b.state FROM batches b JOIN ub ON b.parent_id = ub.id WHERE ub.state = 'split')
			SELECT ub.unit, ub.id, ub.state,
				(SELECT count(*) FROM pay_parts p WHERE p.batch_id = ub.id),
				(SELECT count(*) FROM pay_parts p WHERE p.batch_id = ub.id AND p.state = 'pending'),
				(SELECT count(*) FROM pay_parts p WHERE p.batch_id = ub.id AND p.state = 'rejected')
			FROM ub ORDER BY ub.unit, ub.id`
	}, func(rows *sql.Rows) error {
		var unit, batch int64
		var state paysync.BatchState
		var n, pending, rejected int
		if err := rows.Scan(&unit, &batch, &state, &n, &pending, &rejected); err != nil {
			return err
		}
		u := byID[unit]
		u.Batches = append(u.Batches, batch)
		u.New += n
		u.NotSent += pending
		u.Rejected += rejected
		if state == paysync.BatchFailed {
			failed[unit] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		u := &out[i]
		switch {
		case failed[u.ID]:
			u.State = CorrectionFailed
		case u.ToDelete > 0 || u.NotSent > 0:
			u.State = CorrectionPending
		default:
			u.State = CorrectionDone
		}
	}
	return out, nil
}

// EntryVersion is one version of an entry, as stored.
type EntryVersion struct {
	ImportID int64               `json:"import_id"`
	Source   string              `json:"source"` // the import's name (file, subject)
	Line     int                 `json:"line"`
	Hash     string              `json:"content_hash"`
	Status   paysync.EntryStatus `json:"status"`
	Entry    paysync.Entry       `json:"entry"` // Deleted: a tombstone
	// Statement: a tombstone a period statement recorded because the
	// entry was no longer in it (Line is 0: no row of the file).
	Statement bool `json:"statement,omitempty"`
}

// statementHash is the content hash of the tombstones a period statement
// records (importCommit.statement).
const statementHash = "deleted"

// CorrectedEntry is an entry a unit changed: the version paid before and
// the one that replaced it.
type CorrectedEntry struct {
	EntryID string       `json:"entry_id"`
	Before  EntryVersion `json:"before"`
	After   EntryVersion `json:"after"`
}

// ReplacedState is where a pay part a correction replaced is.
type ReplacedState string

// Replaced pay part states.
const (
	ReplacedToDelete ReplacedState = "to_delete" // payroll still holds it: deleted before the unit sends
	ReplacedDeleted  ReplacedState = "deleted"   // deleted from payroll by paysync
	ReplacedGone     ReplacedState = "gone"      // deleted in payroll by someone else
	ReplacedNotSent  ReplacedState = "not_sent"  // never sent: it is simply not sent
)

// ReplacedPart is a pay part a unit replaced, with the entries behind it
// (a corrected one as it was before).
type ReplacedPart struct {
	ItemDetail
	Status ReplacedState `json:"status"`
}

// CorrectionDelta is what a unit changed for one employee × code: the
// totals of the pay parts replaced and of those created instead.
type CorrectionDelta struct {
	CompanyID    string              `json:"company_id"`
	EmployeeID   string              `json:"employee_id"`
	EmployeeName string              `json:"employee_name,omitempty"`
	Code         string              `json:"code"`
	UnitsBefore  decimal.NullDecimal `json:"units_before"`
	UnitsAfter   decimal.NullDecimal `json:"units_after"`
	AmountBefore decimal.NullDecimal `json:"amount_before"`
	AmountAfter  decimal.NullDecimal `json:"amount_after"`
	Replaced     []int64             `json:"replaced"` // pay part ids
	Created      []int64             `json:"created"`
}

// CorrectionDetail is everything about one unit.
type CorrectionDetail struct {
	CorrectionUnit
	Import        Source            `json:"import"`
	Corrected     []CorrectedEntry  `json:"corrected_entries"`
	ReplacedParts []ReplacedPart    `json:"replaced_pay_parts"`
	NewParts      []ItemDetail      `json:"new_pay_parts"` // a corrected entry as it is after
	Delta         []CorrectionDelta `json:"delta"`
}

// CorrectionDetail returns one unit with its import, entries and pay parts.
func (l *Ledger) CorrectionDetail(ctx context.Context, id int64) (CorrectionDetail, error) {
	u, err := l.Correction(ctx, id)
	if err != nil {
		return CorrectionDetail{}, err
	}
	d := CorrectionDetail{CorrectionUnit: u, Corrected: []CorrectedEntry{}, ReplacedParts: []ReplacedPart{}, NewParts: []ItemDetail{}, Delta: []CorrectionDelta{}}
	fail := func(what string, err error) (CorrectionDetail, error) {
		return CorrectionDetail{}, fmt.Errorf("ledger: correction %d: %s: %w", id, what, err)
	}
	if d.Import, err = l.Source(ctx, u.SourceID); err != nil {
		return CorrectionDetail{}, err
	}
	rows, err := l.correctedEntries(ctx, id)
	if err != nil {
		return fail("entries", err)
	}
	before := map[int64]ItemEntry{}
	after := map[int64]ItemEntry{}
	for _, r := range rows {
		d.Corrected = append(d.Corrected, r.CorrectedEntry)
		before[r.row] = ItemEntry{Source: r.Before.Source, Line: r.Before.Line, EntryID: r.EntryID}
		after[r.row] = ItemEntry{Source: r.After.Source, Line: r.After.Line, EntryID: r.EntryID}
	}

	replaced, err := l.supersededParts(ctx, id)
	if err != nil {
		return fail("replaced pay parts", err)
	}
	var created []Item
	for _, b := range u.Batches {
		items, err := l.Items(ctx, b)
		if err != nil {
			return CorrectionDetail{}, err
		}
		created = append(created, items...)
	}
	ids := make([]int64, 0, len(replaced)+len(created))
	for _, it := range replaced {
		ids = append(ids, it.ID)
	}
	for _, it := range created {
		ids = append(ids, it.ID)
	}
	entries, err := l.partEntries(ctx, ids)
	if err != nil {
		return fail("entries of pay parts", err)
	}
	// An entry the unit corrected is shown as it was in the pay parts
	// replaced and as it is in the ones created.
	withVersion := func(part int64, v map[int64]ItemEntry) []ItemEntry {
		out := []ItemEntry{}
		for _, pe := range entries[part] {
			if e, ok := v[pe.row]; ok {
				out = append(out, e)
				continue
			}
			out = append(out, pe.ItemEntry)
		}
		return out
	}
	for _, it := range replaced {
		d.ReplacedParts = append(d.ReplacedParts, ReplacedPart{ItemDetail: ItemDetail{Item: it, Entries: withVersion(it.ID, before)}, Status: replacedState(it)})
	}
	for _, it := range created {
		d.NewParts = append(d.NewParts, ItemDetail{Item: it, Entries: withVersion(it.ID, after)})
	}
	d.Delta = correctionDelta(replaced, created)
	return d, nil
}

// replacedState says where a superseded pay part is: a pending one was
// marked deleted without ever being sent.
func replacedState(it Item) ReplacedState {
	switch {
	case it.State == paysync.PartCreated:
		return ReplacedToDelete
	case it.State == paysync.PartGone:
		return ReplacedGone
	case it.State == paysync.PartDeleted && it.PayrollID == "":
		return ReplacedNotSent
	}
	return ReplacedDeleted
}

// correctedRow is a corrected entry with its entries.id.
type correctedRow struct {
	CorrectedEntry
	row int64
}

// correctedEntries reads the entries unit changed: the version before
// from entry_versions, the one after from the unit's latest applied
// correction of the entry, and its status from the next unit's version
// (or the entry row, when no later unit changed it).
func (l *Ledger) correctedEntries(ctx context.Context, unit int64) ([]correctedRow, error) {
	rs, err := l.rdb.QueryContext(ctx, `SELECT v.entry, e.entry_id, v.source_id, vs.name, v.line, v.content_hash, v.data, v.status,
			c.source_id, cs.name, c.line, c.content_hash, c.data,
			coalesce((SELECT n.status FROM entry_versions n WHERE n.entry = v.entry AND n.correction > v.correction ORDER BY n.correction LIMIT 1), e.status)
		FROM entry_versions v
		JOIN entries e ON e.id = v.entry
		JOIN sources vs ON vs.id = v.source_id
		JOIN entry_corrections c ON c.id = (SELECT max(c2.id) FROM entry_corrections c2 WHERE c2.correction = v.correction AND c2.entry = v.entry AND c2.state = 'applied')
		JOIN sources cs ON cs.id = c.source_id
		WHERE v.correction = ? ORDER BY v.id`, unit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []correctedRow
	for rs.Next() {
		var r correctedRow
		var old, data []byte
		if err := rs.Scan(&r.row, &r.EntryID, &r.Before.ImportID, &r.Before.Source, &r.Before.Line, &r.Before.Hash, &old, &r.Before.Status,
			&r.After.ImportID, &r.After.Source, &r.After.Line, &r.After.Hash, &data, &r.After.Status); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(old, &r.Before.Entry); err != nil {
			return nil, fmt.Errorf("entry %s before: %w", r.EntryID, err)
		}
		if err := json.Unmarshal(data, &r.After.Entry); err != nil {
			return nil, fmt.Errorf("entry %s after: %w", r.EntryID, err)
		}
		r.After.Statement = r.After.Entry.Deleted && r.After.Hash == statementHash
		r.Before.Entry.Source, r.Before.Entry.Line = r.Before.Source, r.Before.Line
		r.After.Entry.Source, r.After.Entry.Line = r.After.Source, r.After.Line
		out = append(out, r)
	}
	return out, rs.Err()
}

// supersededParts reads the pay parts unit replaced.
func (l *Ledger) supersededParts(ctx context.Context, unit int64) ([]Item, error) {
	return l.queryItems(ctx, `superseded_by = ? ORDER BY id`, unit)
}

// partEntry is an entry behind a pay part, with its entries.id.
type partEntry struct {
	ItemEntry
	row int64
}

// partEntries reads the entries behind pay parts, by pay part id.
func (l *Ledger) partEntries(ctx context.Context, parts []int64) (map[int64][]partEntry, error) {
	keys := make([]string, len(parts))
	for i, p := range parts {
		keys[i] = fmt.Sprint(p)
	}
	out := map[int64][]partEntry{}
	err := queryIn(ctx, l.rdb, keys, func(in string) string {
		return `SELECT pay_part_id, row, name, line, entry_id FROM (` + partEntriesSQL + `) WHERE pay_part_id IN (` + in + `) ORDER BY pay_part_id, row`
	}, func(rows *sql.Rows) error {
		var part int64
		var pe partEntry
		if err := rows.Scan(&part, &pe.row, &pe.Source, &pe.Line, &pe.EntryID); err != nil {
			return err
		}
		out[part] = append(out[part], pe)
		return nil
	})
	return out, err
}

// correctionDelta sums the replaced and the created pay parts per
// company × employee × code (exactly), in order of first appearance.
func correctionDelta(replaced, created []Item) []CorrectionDelta {
	out := []CorrectionDelta{}
	at := map[[3]string]int{}
	group := func(it Item) *CorrectionDelta {
		k := [3]string{it.CompanyID, it.EmployeeID, it.Code}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, CorrectionDelta{CompanyID: it.CompanyID, EmployeeID: it.EmployeeID, EmployeeName: it.EmployeeName, Code: it.Code,
				Replaced: []int64{}, Created: []int64{}})
		}
		return &out[i]
	}
	for _, it := range replaced {
		g := group(it)
		g.UnitsBefore, g.AmountBefore = addDec(g.UnitsBefore, it.Units), addDec(g.AmountBefore, it.Amount)
		g.Replaced = append(g.Replaced, it.ID)
	}
	for _, it := range created {
		g := group(it)
		if g.EmployeeName == "" {
			g.EmployeeName = it.EmployeeName
		}
		g.UnitsAfter, g.AmountAfter = addDec(g.UnitsAfter, it.Units), addDec(g.AmountAfter, it.Amount)
		g.Created = append(g.Created, it.ID)
	}
	return out
}

// addDec adds two optional decimals: absent only when both are.
func addDec(a, b decimal.NullDecimal) decimal.NullDecimal {
	switch {
	case !b.Valid:
		return a
	case !a.Valid:
		return b
	}
	return decimal.NewNullDecimal(a.Decimal.Add(b.Decimal))
}

// WaitingCorrection is a correction recorded and not applied yet.
type WaitingCorrection struct {
	ID         int64     `json:"id"`
	EntryID    string    `json:"entry"`
	SourceID   int64     `json:"import"`
	SourceName string    `json:"source"`
	Line       int       `json:"line"`
	Since      time.Time `json:"since"`
	// Why is why it was not applied the last time the corrector tried it
	// ("" when it has not been held up, only not tried yet).
	Why string `json:"why,omitempty"`
}

// WaitingCorrections returns how many corrections are pending (the latest
// of each entry) and the first limit of them, oldest first.
func (l *Ledger) WaitingCorrections(ctx context.Context, limit int) (int, []WaitingCorrection, error) {
	const latest = `c.state = 'pending' AND c.id = (SELECT max(c2.id) FROM entry_corrections c2 WHERE c2.entry = c.entry AND c2.state = 'pending')`
	var n int
	if err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM entry_corrections c WHERE `+latest).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("ledger: waiting corrections: %w", err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	rows, err := l.rdb.QueryContext(ctx, `SELECT c.id, e.entry_id, c.source_id, s.name, c.line, c.created_at, c.waiting
		FROM entry_corrections c JOIN entries e ON e.id = c.entry JOIN sources s ON s.id = c.source_id
		WHERE `+latest+` ORDER BY c.id LIMIT ?`, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("ledger: waiting corrections: %w", err)
	}
	defer rows.Close()
	var out []WaitingCorrection
	for rows.Next() {
		var w WaitingCorrection
		var at string
		if err := rows.Scan(&w.ID, &w.EntryID, &w.SourceID, &w.SourceName, &w.Line, &at, &w.Why); err != nil {
			return 0, nil, fmt.Errorf("ledger: waiting corrections: %w", err)
		}
		w.Since = parseTS(at)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("ledger: waiting corrections: %w", err)
	}
	return n, out, nil
}
