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
)

// addCorrection records c, a new version of the entry with c's id paid
// before, as a pending correction brought by source.
func addCorrection(st *stmts, source int64, c NewEntry, now string) error {
	data := c.Data
	if data == nil {
		var err error
		if data, err = json.Marshal(c.Entry); err != nil {
			return err
		}
	}
	res, err := st.exec(`INSERT INTO entry_corrections (entry, source_id, line, content_hash, data, state, created_at)
		SELECT id, ?, ?, ?, ?, 'pending', ? FROM entries WHERE entry_id = ?`, source, c.Entry.Line, c.Hash, data, now, c.Entry.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("correction of entry %s: no such entry", c.Entry.ID)
	}
	return nil
}

// PendingCorrection is a new version of an entry waiting to be applied.
type PendingCorrection struct {
	ID       int64
	Entry    int64 // the entry's row
	SourceID int64 // the import that brought it
	Hash     string
	New      paysync.Entry // Source and Line: where the new version came from
	Old      paysync.Entry // the version paid now
	OldHash  string
	// Held: re-planned as stored (ID 0), the entry was held (no pay part)
	// when planned. ApplyCorrection checks it still is, and that it is in
	// no live pay part but those the unit replaces: another unit (a
	// merge, a replay, a revert) that took it meanwhile makes this one
	// stale.
	Held bool
}

// PreviewCorrections returns the corrections the staged import would
// record (its changed entries, and the entries a period statement would
// remove), as PendingCorrections would once it is committed: for a dry
// run's delta.
func (s *StagedImport) PreviewCorrections() ([]PendingCorrection, error) {
	if err := s.Flush(); err != nil {
		return nil, err
	}
	qs := []string{s.q(`SELECT e.id, k.content_hash, k.data, k.line, e.data, e.content_hash, e.line, es.name
		FROM %scorrections k JOIN entries e ON e.entry_id = k.entry_id JOIN sources es ON es.id = e.source_id ORDER BY k.seq`)}
	var args [][]any
	args = append(args, nil)
	if st := s.in.Statement; st != nil && s.nRejects == 0 {
		for _, p := range st.Periods {
			qs = append(qs, s.q(`SELECT e.id, '`+statementHash+`', json_object('id', e.entry_id, 'deleted', json('true')), 0, e.data, e.content_hash, e.line, es.name
				FROM entries e JOIN sources es ON es.id = e.source_id
				WHERE e.origin = ? AND e.entry_date BETWEEN ? AND ? AND e.status = 'mapped'
					AND e.entry_id NOT IN (SELECT entry_id FROM %sseen)
					AND NOT EXISTS (SELECT 1 FROM closed_periods cp WHERE e.entry_date BETWEEN cp.first_day AND cp.last_day)
					AND EXISTS (SELECT 1 FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id
						WHERE pe.entry_id = e.id AND p.state IN ('pending', 'created') AND p.superseded_by IS NULL
						AND p.company_id IN (SELECT value FROM json_each(?)))
				ORDER BY e.id`))
			args = append(args, []any{st.Origin, p.First().Format(time.DateOnly), p.Last().Format(time.DateOnly), st.companiesJSON()})
		}
	}
	var out []PendingCorrection
	for i, q := range qs {
		rows, err := s.l.db.QueryContext(s.ctx, q, args[i]...)
		if err != nil {
			return nil, fmt.Errorf("ledger: preview corrections: %w", err)
		}
		for rows.Next() {
			var pc PendingCorrection
			var data, old []byte
			var line, oldLine int
			var oldSrc string
			if err := rows.Scan(&pc.Entry, &pc.Hash, &data, &line, &old, &pc.OldHash, &oldLine, &oldSrc); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger: preview corrections: %w", err)
			}
			if err := json.Unmarshal(data, &pc.New); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger: preview corrections: %w", err)
			}
			if err := json.Unmarshal(old, &pc.Old); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger: preview corrections: %w", err)
			}
			pc.New.Source, pc.New.Line = s.in.Name, line
			pc.Old.Source, pc.Old.Line = oldSrc, oldLine
			out = append(out, pc)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PendingCorrections returns up to limit pending corrections, oldest
// first, one per entry (the entry's latest: an earlier one it overtakes is
// applied with it).
func (l *Ledger) PendingCorrections(ctx context.Context, limit int) ([]PendingCorrection, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT c.id, c.entry, c.source_id, c.content_hash, c.data, c.line, s.name, e.data, e.content_hash, e.line, es.name
		FROM entry_corrections c JOIN sources s ON s.id = c.source_id JOIN entries e ON e.id = c.entry JOIN sources es ON es.id = e.source_id
		WHERE c.state = 'pending' AND c.id = (SELECT max(c2.id) FROM entry_corrections c2 WHERE c2.entry = c.entry AND c2.state = 'pending')
		ORDER BY c.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: pending corrections: %w", err)
	}
	defer rows.Close()
	var out []PendingCorrection
	for rows.Next() {
		var pc PendingCorrection
		var data, old []byte
		var line, oldLine int
		var src, oldSrc string
		if err := rows.Scan(&pc.ID, &pc.Entry, &pc.SourceID, &pc.Hash, &data, &line, &src, &old, &pc.OldHash, &oldLine, &oldSrc); err != nil {
			return nil, fmt.Errorf("ledger: pending corrections: %w", err)
		}
		if err := json.Unmarshal(data, &pc.New); err != nil {
			return nil, fmt.Errorf("ledger: pending correction %d: %w", pc.ID, err)
		}
		if err := json.Unmarshal(old, &pc.Old); err != nil {
			return nil, fmt.Errorf("ledger: entry of correction %d: %w", pc.ID, err)
		}
		pc.New.Source, pc.New.Line = src, line
		pc.Old.Source, pc.Old.Line = oldSrc, oldLine
		out = append(out, pc)
	}
	return out, rows.Err()
}

// SupersedablePart is a pay part that payroll holds or will hold (pending or
// created, not superseded), with the entries behind it.
type SupersedablePart struct {
	Item
	BatchState paysync.BatchState
	Entries    []LiveEntry
}

// LiveEntry is an entry behind a live pay part, as stored.
type LiveEntry struct {
	Row   int64 // entries.id
	Entry paysync.Entry
	Hash  string // its content hash as stored (EntriesIn, CutoffEntries)
	Held  bool   // held for the cutoff, no pay part yet (EntriesIn)
}

// PartsOfEntries returns the live pay parts the entries (rows) are in, each
// with all its entries.
func (l *Ledger) PartsOfEntries(ctx context.Context, entries []int64) ([]SupersedablePart, error) {
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = fmt.Sprint(e)
	}
	var ids []string
	seen := map[string]bool{}
	err := queryIn(ctx, l.rdb, keys, func(in string) string {
		return `SELECT DISTINCT p.id FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id
			WHERE pe.entry_id IN (` + in + `) AND p.state IN ('pending', 'created') AND p.superseded_by IS NULL`
	}, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: live pay parts: %w", err)
	}
	return l.partsByID(ctx, ids)
}

// partsByID returns the pay parts with these ids, each with all its
// entries, in the order of their ids.
func (l *Ledger) partsByID(ctx context.Context, ids []string) ([]SupersedablePart, error) {
	byID := map[int64]*SupersedablePart{}
	var out []*SupersedablePart
	err := queryIn(ctx, l.rdb, ids, func(in string) string {
		return `SELECT p.id, p.batch_id, p.seq, p.company_id, p.employee_id, p.employee_name, p.code, p.units, p.rate, p.amount, p.description, p.rule,
				p.state, coalesce(p.payroll_id, ''), b.state, e.id, e.data, e.line, s.name, e.content_hash
			FROM pay_parts p JOIN batches b ON b.id = p.batch_id JOIN pay_part_entries pe ON pe.pay_part_id = p.id
			JOIN entries e ON e.id = pe.entry_id JOIN sources s ON s.id = e.source_id
			WHERE p.id IN (` + in + `) ORDER BY p.id, e.id`
	}, func(rows *sql.Rows) error {
		var it Item
		var u, r, a sql.NullString
		var bs paysync.BatchState
		var row int64
		var data []byte
		var line int
		var src, hash string
		if err := rows.Scan(&it.ID, &it.BatchID, &it.Seq, &it.CompanyID, &it.EmployeeID, &it.EmployeeName, &it.Code, &u, &r, &a,
			&it.Description, &it.Rule, &it.State, &it.PayrollID, &bs, &row, &data, &line, &src, &hash); err != nil {
			return err
		}
		lp := byID[it.ID]
		if lp == nil {
			it.Units, it.Rate, it.Amount = textDec(u), textDec(r), textDec(a)
			lp = &SupersedablePart{Item: it, BatchState: bs}
			byID[it.ID] = lp
			out = append(out, lp)
		}
		var e paysync.Entry
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("stored entry %d: %w", row, err)
		}
		e.Source, e.Line = src, line
		lp.Entries = append(lp.Entries, LiveEntry{Row: row, Entry: e, Hash: hash})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: live pay parts: %w", err)
	}
	res := make([]SupersedablePart, len(out))
	for i, lp := range out {
		res[i] = *lp
	}
	return res, nil
}

// Correction is one unit the corrector applies: entries take their new
// versions, the pay parts they were in are superseded, and the entries of
// those pay parts are planned again into PayParts (sent after the
// superseded ones are deleted).
type Correction struct {
	SourceID int64 // the import that brought the corrections
	// Source, when set, is recorded as the unit's source (kind replay): a
	// revert or replay of a period, which no import brought.
	Source    *NewSource
	CompanyID string // the company of its pay parts (the first, if they are of several)
	// Pending are the pending corrections applied (every pending one of
	// their entries up to these is done with them).
	Pending []PendingCorrection
	// Status of each corrected entry's new version (by entry row), and
	// the skip reason.
	Status map[int64]NewEntryStatus
	// Supersede are the live pay parts replaced, as read: applying fails
	// with ErrCorrectionStale if any changed since.
	Supersede []SupersedablePart
	// PayParts are the new pay parts; Entries name entries by their row
	// (PayPartRows[i] for PayParts[i]).
	PayParts    []paysync.PlannedPayPart
	PayPartRows [][]int64
	BatchSize   int
}

// Scope names the entries of a period, of one source (origin) and one
// company when those are set: what paysync revert and replay --period
// take.
type Scope struct {
	Period  paysync.Period
	Origin  string
	Company string
	// SourceID, when set, takes the entries of one import (a NATS message,
	// whose pay parts went into batches shared with other messages)
	// instead of a period's.
	SourceID int64
}

func (sc Scope) String() string {
	if sc.SourceID != 0 {
		return fmt.Sprintf("import %d", sc.SourceID)
	}
	s := sc.Period.String()
	if sc.Origin != "" {
		s += " source " + sc.Origin
	}
	if sc.Company != "" {
		s += " company " + sc.Company
	}
	return s
}

// EntriesIn returns the entries in scope, as stored (tombstones left
// out): a pay part's company is known only through its pay parts, so the
// company is the caller's to check.
func (l *Ledger) EntriesIn(ctx context.Context, sc Scope) ([]LiveEntry, error) {
	where := `e.entry_date BETWEEN ? AND ?`
	args := []any{sc.Period.First().Format(time.DateOnly), sc.Period.Last().Format(time.DateOnly)}
	if sc.SourceID != 0 {
		where, args = `e.source_id = ?`, []any{sc.SourceID}
	}
	where += ` AND NOT (e.status = 'skipped' AND e.note = 'deleted')`
	if sc.Origin != "" {
		where += ` AND e.origin = ?`
		args = append(args, sc.Origin)
	}
	out, err := l.liveEntries(ctx, where, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: entries of %s: %w", sc, err)
	}
	return out, nil
}

// liveEntries reads the entries (e) where says, as stored.
func (l *Ledger) liveEntries(ctx context.Context, where string, args ...any) ([]LiveEntry, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT e.id, e.data, e.line, s.name, e.content_hash, e.status = 'mapped' AND e.note = '`+HeldNote+`'
		FROM entries e JOIN sources s ON s.id = e.source_id WHERE `+where+` ORDER BY e.id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LiveEntry
	for rows.Next() {
		var le LiveEntry
		var data []byte
		var line int
		var src string
		if err := rows.Scan(&le.Row, &data, &line, &src, &le.Hash, &le.Held); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &le.Entry); err != nil {
			return nil, fmt.Errorf("stored entry %d: %w", le.Row, err)
		}
		le.Entry.Source, le.Entry.Line = src, line
		out = append(out, le)
	}
	return out, rows.Err()
}

// HeldNote marks a mapped entry held for the cutoff (PAYSYNC_SEND=cutoff):
// no pay part yet.
const HeldNote = "held"

// HeldDates returns the distinct dates of the held entries.
func (l *Ledger) HeldDates(ctx context.Context) ([]string, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT DISTINCT entry_date FROM entries WHERE status = 'mapped' AND note = ? ORDER BY entry_date`, HeldNote)
	if err != nil {
		return nil, fmt.Errorf("ledger: held entries: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("ledger: held entries: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// CutoffEntries returns what a cutoff plans for period p: its held
// entries and, unless withPaid is false, the entries of its live pay parts
// (their aggregates are planned again with the held ones).
func (l *Ledger) CutoffEntries(ctx context.Context, p paysync.Period, withPaid bool) ([]LiveEntry, error) {
	where := `e.entry_date BETWEEN ? AND ? AND e.status = 'mapped' AND (e.note = ?`
	if withPaid {
		where += ` OR ` + liveEntry
	}
	out, err := l.liveEntries(ctx, where+`)`, p.First().Format(time.DateOnly), p.Last().Format(time.DateOnly), HeldNote)
	if err != nil {
		return nil, fmt.Errorf("ledger: entries of the cutoff of %s: %w", p, err)
	}
	return out, nil
}

// oldestHeld reads the oldest held entries through the partial index
// entries_held_id (in id order, held entries only), so that it is a short
// read however large the ledger, and the backlog beyond its limit is not
// read.
const oldestHeld = `SELECT id FROM entries WHERE note = ? AND status = 'mapped' ORDER BY id LIMIT ?`

// HeldEntries returns up to limit held entries, oldest first: what a merge
// (PAYSYNC_SEND=immediate with aggregation) plans next.
func (l *Ledger) HeldEntries(ctx context.Context, limit int) ([]LiveEntry, error) {
	out, err := l.liveEntries(ctx, `e.id IN (`+oldestHeld+`)`, HeldNote, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: held entries: %w", err)
	}
	return out, nil
}

// PartGroup names the live pay parts of one company × employee × code ×
// rule whose entries are dated in a period (a merge's aggregates; the rate
// is the caller's to compare).
type PartGroup struct {
	Company, Employee, Code, Rule string
	Period                        paysync.Period
}

// LivePartsOfGroups returns the live pay parts (pending or created, not
// superseded) of the groups, each with all its entries.
//
// With maxEntries > 0, a pay part that sums maxEntries entries or more is
// left out (a merge plans a new pay part beside it): what is read, and
// planned again, stays bounded however many entries one group gathers.
func (l *Ledger) LivePartsOfGroups(ctx context.Context, groups []PartGroup, maxEntries int) ([]SupersedablePart, error) {
	var ids []string
	seen := map[string]bool{}
	for _, g := range groups {
		// pay_parts_company narrows to the company's live pay parts; the
		// EXISTS stops at a pay part's first entry in the period (a pay
		// part's entries are of one period).
		rows, err := l.rdb.QueryContext(ctx, `SELECT p.id FROM pay_parts p
			WHERE p.company_id = ? AND p.state IN ('pending', 'created') AND p.superseded_by IS NULL
				AND p.employee_id = ? AND p.code = ? AND p.rule = ?
				AND EXISTS (SELECT 1 FROM pay_part_entries pe JOIN entries e ON e.id = pe.entry_id
					WHERE pe.pay_part_id = p.id AND e.entry_date BETWEEN ? AND ?)
				AND (? <= 0 OR (SELECT count(*) FROM pay_part_entries c WHERE c.pay_part_id = p.id) < ?)
			ORDER BY p.id`,
			g.Company, g.Employee, g.Code, g.Rule, g.Period.First().Format(time.DateOnly), g.Period.Last().Format(time.DateOnly), maxEntries, maxEntries)
		if err != nil {
			return nil, fmt.Errorf("ledger: live pay parts of %s|%s|%s in %s: %w", g.Company, g.Employee, g.Code, g.Period, err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger: live pay parts: %w", err)
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("ledger: live pay parts: %w", err)
		}
	}
	return l.partsByID(ctx, ids)
}

// NewEntryStatus is what a corrected entry's new version mapped to.
type NewEntryStatus struct {
	Status paysync.EntryStatus
	Note   string
}

// ErrCorrectionStale: what a correction was planned on changed (a batch
// began sending, a pay part was reverted, another correction came first);
// plan it again.
var ErrCorrectionStale = errors.New("ledger: correction: the pay parts it replaces changed; plan it again")

// ApplyCorrection applies c in one transaction and returns the unit's id
// and its new batches. A superseded pay part never sent is simply not
// sent (deleted); one payroll holds is marked for the unit's delete, which
// the sender makes before the unit's batches go out.
func (l *Ledger) ApplyCorrection(ctx context.Context, c Correction) (unit int64, batches []int64, err error) {
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	err = l.tx(ctx, "apply correction", func(tx *sql.Tx) error {
		st := l.stmts(ctx, tx)
		defer st.close()
		now := l.ts()
		replaced := make(map[int64]bool, len(c.Supersede))
		for _, lp := range c.Supersede {
			replaced[lp.ID] = true
		}
		for _, p := range c.Pending {
			if p.ID == 0 {
				// Re-mapped as stored (a replay, a cutoff, a merge, a
				// revert): the entry must still be what was planned
				// (intake may have taken a held entry again, or a
				// tombstone), held if it was, and in no live pay part but
				// those this unit replaces (another unit may have paid or
				// reverted it since: two would pay it twice).
				var hash string
				var held bool
				if err := st.queryRow(`SELECT content_hash, status = 'mapped' AND note = ? FROM entries WHERE id = ?`, HeldNote, p.Entry).Scan(&hash, &held); err != nil {
					return err
				}
				if hash != p.OldHash || held != p.Held {
					return ErrCorrectionStale
				}
				rows, err := tx.QueryContext(ctx, `SELECT p.id FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id
					WHERE pe.entry_id = ? AND p.state IN ('pending', 'created') AND p.superseded_by IS NULL`, p.Entry)
				if err != nil {
					return err
				}
				stale := false
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						rows.Close()
						return err
					}
					stale = stale || !replaced[id]
				}
				if err := rows.Close(); err != nil {
					return err
				}
				if stale {
					return ErrCorrectionStale
				}
				continue
			}
			var state string
			if err := st.queryRow(`SELECT state FROM entry_corrections WHERE id = ?`, p.ID).Scan(&state); err != nil {
				return err
			}
			if state != "pending" {
				return ErrCorrectionStale
			}
		}
		for _, lp := range c.Supersede {
			var state paysync.PartState
			var sup sql.NullInt64
			var bs paysync.BatchState
			if err := st.queryRow(`SELECT p.state, p.superseded_by, b.state FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE p.id = ?`, lp.ID).Scan(&state, &sup, &bs); err != nil {
				return err
			}
			if state != lp.State || sup.Valid || bs == paysync.BatchSending || bs == paysync.BatchReverting {
				return ErrCorrectionStale
			}
		}
		if c.Source != nil {
			var err error
			if c.SourceID, err = insertSource(st, paysync.SourceReplay, c.Source.Name, c.Source.Hash, "", 0, nil, paysync.SourceCommitted, len(c.Pending), 0, 0, 0, now); err != nil {
				return err
			}
		}
		res, err := st.exec(`INSERT INTO corrections (source_id, company_id, entries, superseded, created_at) VALUES (?, ?, ?, ?, ?)`,
			c.SourceID, c.CompanyID, len(c.Pending), len(c.Supersede), now)
		if err != nil {
			return err
		}
		unit, _ = res.LastInsertId()
		for _, p := range c.Pending {
			ns := c.Status[p.Entry]
			if p.ID == 0 {
				// Re-mapped as stored: only what the rules make of it changes.
				if _, err := st.exec(`UPDATE entries SET status = ?, note = ? WHERE id = ?`, ns.Status, ns.Note, p.Entry); err != nil {
					return err
				}
				continue
			}
			if _, err := st.exec(`INSERT INTO entry_versions (entry, source_id, line, content_hash, data, status, correction)
				SELECT id, source_id, line, content_hash, data, status, ? FROM entries WHERE id = ?`, unit, p.Entry); err != nil {
				return err
			}
			if _, err := st.exec(`UPDATE entries SET source_id = c.source_id, line = c.line, content_hash = c.content_hash, data = c.data, status = ?, note = ?,
					entry_date = coalesce(nullif(json_extract(CAST(c.data AS TEXT), '$.date'), ''), entries.entry_date)
				FROM entry_corrections c WHERE c.id = ? AND entries.id = c.entry`, ns.Status, ns.Note, p.ID); err != nil {
				return err
			}
			if _, err := st.exec(`UPDATE entry_corrections SET state = 'applied', correction = ? WHERE entry = ? AND state = 'pending' AND id <= ?`, unit, p.Entry, p.ID); err != nil {
				return err
			}
		}
		for _, lp := range c.Supersede {
			if lp.State == paysync.PartPending {
				// Never sent: it is simply not sent.
				_, err = st.exec(`UPDATE pay_parts SET state = 'deleted', superseded_by = ?, updated_at = ? WHERE id = ?`, unit, now, lp.ID)
			} else {
				_, err = st.exec(`UPDATE pay_parts SET superseded_by = ?, updated_at = ? WHERE id = ?`, unit, now, lp.ID)
			}
			if err != nil {
				return err
			}
		}
		// Per company, in order of first appearance, at most BatchSize each.
		var companies []string
		byCompany := map[string][]int{}
		for i, pp := range c.PayParts {
			if _, ok := byCompany[pp.CompanyID]; !ok {
				companies = append(companies, pp.CompanyID)
			}
			byCompany[pp.CompanyID] = append(byCompany[pp.CompanyID], i)
		}
		for _, p := range c.Supersede {
			if _, ok := byCompany[p.CompanyID]; !ok && p.State == paysync.PartCreated {
				// Nothing to create for the company, only to delete (a
				// tombstone): an empty batch carries its delete to the
				// sender.
				companies, byCompany[p.CompanyID] = append(companies, p.CompanyID), nil
			}
		}
		for _, company := range companies {
			idx := byCompany[company]
			newBatch := func() (int64, error) {
				res, err := st.exec(`INSERT INTO batches (company_id, source_id, state, created_at, updated_at, correction_id) VALUES (?, ?, 'pending', ?, ?, ?)`,
					company, c.SourceID, now, now, unit)
				if err != nil {
					return 0, err
				}
				bid, _ := res.LastInsertId()
				batches = append(batches, bid)
				return bid, nil
			}
			if len(idx) == 0 {
				if _, err := newBatch(); err != nil {
					return err
				}
			}
			for start := 0; start < len(idx); start += c.BatchSize {
				chunk := idx[start:min(start+c.BatchSize, len(idx))]
				bid, err := newBatch()
				if err != nil {
					return err
				}
				for seq, i := range chunk {
					pp := c.PayParts[i]
					res, err := st.exec(`INSERT INTO pay_parts (`+payPartCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)`,
						bid, seq, pp.CompanyID, pp.EmployeeID, pp.EmployeeName, pp.Code, decText(pp.Units), decText(pp.Rate), decText(pp.Amount),
						pp.Description, pp.Rule, now)
					if err != nil {
						return err
					}
					pid, _ := res.LastInsertId()
					if err := linkEntries(st, pid, c.PayPartRows[i]); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if errors.Is(err, ErrCorrectionStale) {
		return 0, nil, ErrCorrectionStale
	}
	return unit, batches, err
}

// linkChunk is how many entries one insert links to a pay part (an
// aggregate can sum many thousands: one statement per entry would hold
// the writer that much longer).
const linkChunk = 400

// linkEntries links the entries (rows) to pay part pid, linkChunk a
// statement.
func linkEntries(st *stmts, pid int64, rows []int64) error {
	for start := 0; start < len(rows); start += linkChunk {
		part := rows[start:min(start+linkChunk, len(rows))]
		args := make([]any, 0, 2*len(part))
		for _, row := range part {
			args = append(args, pid, row)
		}
		q := `INSERT OR IGNORE INTO pay_part_entries (pay_part_id, entry_id) VALUES ` + strings.TrimSuffix(strings.Repeat(`(?, ?), `, len(part)), ", ")
		if _, err := st.exec(q, args...); err != nil {
			return err
		}
	}
	return nil
}

// SupersededBy returns the pay parts of company that correction unit
// replaces and payroll may still hold (created), by batch. (A unit's
// batch of one company deletes that company's: each company's calls stay
// one at a time.)
func (l *Ledger) SupersededBy(ctx context.Context, unit int64, company string) (map[int64][]Item, []int64, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT id, batch_id, company_id, coalesce(payroll_id, ''), coalesce(delete_attempt, 0)
		FROM pay_parts WHERE superseded_by = ? AND company_id = ? AND state = 'created' ORDER BY batch_id, id`, unit, company)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: superseded pay parts: %w", err)
	}
	defer rows.Close()
	out := map[int64][]Item{}
	var order []int64
	for rows.Next() {
		var it Item
		if err := rows.Scan(&it.ID, &it.BatchID, &it.CompanyID, &it.PayrollID, &it.DeleteAttempt); err != nil {
			return nil, nil, err
		}
		it.State = paysync.PartCreated
		if _, ok := out[it.BatchID]; !ok {
			order = append(order, it.BatchID)
		}
		out[it.BatchID] = append(out[it.BatchID], it)
	}
	return out, order, rows.Err()
}

// SkipCorrection marks pending corrections that change nothing payroll
// holds (the entry is back to its paid content, or an earlier one is
// overtaken) as done without a unit.
func (l *Ledger) SkipCorrection(ctx context.Context, p PendingCorrection) error {
	return l.tx(ctx, "skip correction", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE entry_corrections SET state = 'unchanged' WHERE entry = ? AND state = 'pending' AND id <= ?`, p.Entry, p.ID)
		return err
	})
}

// RejectCorrection records that a correction cannot be applied because of
// its new version (a problem of the input, r, kept with the source that
// brought it): the version paid stays.
func (l *Ledger) RejectCorrection(ctx context.Context, p PendingCorrection, r NewReject) error {
	return l.tx(ctx, "reject correction", func(tx *sql.Tx) error {
		now := l.ts()
		if _, err := tx.ExecContext(ctx, `UPDATE entry_corrections SET state = 'rejected' WHERE entry = ? AND state = 'pending' AND id <= ?`, p.Entry, p.ID); err != nil {
			return err
		}
		// Counted with its import: the same content imported again is
		// taken again (Source.Retry), so the correction gets another
		// chance once its cause is fixed.
		if _, err := tx.ExecContext(ctx, `UPDATE sources SET rejects = rejects + 1 WHERE id = ?`, p.SourceID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO rejects (source_id, entry_id, line, field, message, hint, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.SourceID, r.EntryID, r.Line, r.Field, r.Message, r.Hint, now)
		return err
	})
}

// BeginSupersedeDelete records, before delete_pay_parts is called, a
// delete attempt on batch for pay parts a correction replaces. Unlike a
// revert's, it leaves the batch's state alone: its other pay parts stay.
func (l *Ledger) BeginSupersedeDelete(ctx context.Context, batchID int64, items int) (int64, error) {
	var id int64
	err := l.tx(ctx, "begin supersede delete", func(tx *sql.Tx) error {
		// A period closed since the plan: its pay parts there stay.
		if changed, err := freeze(ctx, tx, l.ts(), `0 AND ? IS NULL`, `batch_id = ? AND superseded_by IS NOT NULL`, nil, batchID); err != nil {
			return err
		} else if changed {
			return ErrBatchChanged
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO attempts (batch_id, op, items, started_at) VALUES (?, 'delete', ?, ?)`, batchID, items, l.ts())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}
