package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// Group is a group as the reconciler reads it: its key, exact totals of
// the lines that count (desired) and the pay parts live for it (actual).
type Group struct {
	ID           int64
	Key          GroupKey
	EmployeeName string
	Description  string
	Rule         string
	FromHours    bool
	Seconds      decimal.NullDecimal
	Units        decimal.NullDecimal
	Amount       decimal.NullDecimal
	Lines        int
	Version      int64
	DirtyAt      time.Time // since when it waits to be planned (zero: not known)
	Frozen       bool      // in a closed period
	Live         []LiveGroupPart
}

// LiveGroupPart is a pay part live for a group: created, or pending in a
// batch still to be sent, and not replaced (superseded) by a later plan.
// This is the one definition of live.
type LiveGroupPart struct {
	ID         int64
	BatchID    int64
	BatchState paysync.BatchState
	State      paysync.PartState
	PayrollID  string
	Units      decimal.NullDecimal
	Rate       decimal.NullDecimal
	Amount     decimal.NullDecimal
}

// livePartsWhere selects the live pay parts (p) of their batch (b).
const livePartsWhere = `p.superseded_by IS NULL AND (p.state = 'created' OR (p.state = 'pending' AND b.state IN ('pending', 'sending', 'failed')))`

// heldPartsWhere selects the pay parts (p) of their batch (b) payroll
// holds or will: live, or replaced by a plan whose delete is still to come.
const heldPartsWhere = `(p.state = 'created' OR (p.state = 'pending' AND p.superseded_by IS NULL AND b.state IN ('pending', 'sending', 'failed')))`

// frozenGroup is true for a group (g) of a closed period.
const frozenGroup = `EXISTS (SELECT 1 FROM closed_periods c WHERE c.first_day <= g.last_day AND c.last_day >= g.first_day)`

// GroupFilter narrows the groups read.
type GroupFilter struct {
	Company string
	Period  *paysync.Period // groups overlapping it
	Dirty   bool            // only groups whose totals changed since planned
	Frozen  bool            // include groups of closed periods
	After   int64           // groups with a larger id (paging)
	Limit   int
}

// Groups reads groups with their live pay parts, in order of id.
func (l *Ledger) Groups(ctx context.Context, f GroupFilter) ([]Group, error) {
	where := []string{"1"}
	var args []any
	if f.Company != "" {
		where, args = append(where, "g.company_id = ?"), append(args, f.Company)
	}
	if f.Period != nil {
		where, args = append(where, "g.first_day <= ? AND g.last_day >= ?"), append(args, f.Period.Last().Format(time.DateOnly), f.Period.First().Format(time.DateOnly))
	}
	if f.Dirty {
		where = append(where, "g.dirty = 1")
	}
	if !f.Frozen {
		where = append(where, "NOT "+frozenGroup)
	}
	where, args = append(where, "g.id > ?"), append(args, f.After)
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	args = append(args, f.Limit)
	rows, err := l.rdb.QueryContext(ctx, `SELECT g.id, g.company_id, g.employee_id, g.code, g.rate, g.period, g.own, g.employee_name, g.description, g.rule,
			g.from_hours, g.seconds, g.units, g.amount, g.lines, g.version, g.dirty_at, `+frozenGroup+`
		FROM groups g WHERE `+strings.Join(where, " AND ")+` ORDER BY g.id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: groups: %w", err)
	}
	var out []Group
	for rows.Next() {
		var g Group
		var period string
		var seconds, units, amount sql.NullString
		var dirtyAt string
		if err := rows.Scan(&g.ID, &g.Key.Company, &g.Key.Employee, &g.Key.Code, &g.Key.Rate, &period, &g.Key.Own, &g.EmployeeName, &g.Description, &g.Rule,
			&g.FromHours, &seconds, &units, &amount, &g.Lines, &g.Version, &dirtyAt, &g.Frozen); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: groups: %w", err)
		}
		g.Key.Period, _ = paysync.ParsePeriod(period)
		g.Seconds, g.Units, g.Amount = textDec(seconds), textDec(units), textDec(amount)
		g.DirtyAt = parseTS(dirtyAt)
		out = append(out, g)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("ledger: groups: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	// Their live pay parts in one read (the page's id range).
	at := make(map[int64]int, len(out))
	for i, g := range out {
		at[g.ID] = i
	}
	rows, err = l.rdb.QueryContext(ctx, `SELECT p.group_id, p.id, p.batch_id, b.state, p.state, coalesce(p.payroll_id, ''), p.units, p.rate, p.amount
		FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE p.group_id BETWEEN ? AND ? AND `+livePartsWhere+` ORDER BY p.id`, out[0].ID, out[len(out)-1].ID)
	if err != nil {
		return nil, fmt.Errorf("ledger: groups: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var g int64
		var lp LiveGroupPart
		var units, rate, amount sql.NullString
		if err := rows.Scan(&g, &lp.ID, &lp.BatchID, &lp.BatchState, &lp.State, &lp.PayrollID, &units, &rate, &amount); err != nil {
			return nil, fmt.Errorf("ledger: groups: %w", err)
		}
		if i, ok := at[g]; ok {
			lp.Units, lp.Rate, lp.Amount = textDec(units), textDec(rate), textDec(amount)
			out[i].Live = append(out[i].Live, lp)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: groups: %w", err)
	}
	return out, nil
}

type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// liveOfGroup reads a group's live pay parts.
func liveOfGroup(ctx context.Context, q querier, group int64) ([]LiveGroupPart, error) {
	rows, err := q.QueryContext(ctx, `SELECT p.id, p.batch_id, b.state, p.state, coalesce(p.payroll_id, ''), p.units, p.rate, p.amount
		FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE p.group_id = ? AND `+livePartsWhere+` ORDER BY p.id`, group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LiveGroupPart
	for rows.Next() {
		var lp LiveGroupPart
		var units, rate, amount sql.NullString
		if err := rows.Scan(&lp.ID, &lp.BatchID, &lp.BatchState, &lp.State, &lp.PayrollID, &units, &rate, &amount); err != nil {
			return nil, err
		}
		lp.Units, lp.Rate, lp.Amount = textDec(units), textDec(rate), textDec(amount)
		out = append(out, lp)
	}
	return out, rows.Err()
}

// Waiting reports what keeps the reconciler from planning: entries from
// before the desired state whose lines are not mapped yet.
func (l *Ledger) Waiting(ctx context.Context) (legacy int, err error) {
	err = l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE pending = 1`).Scan(&legacy)
	if err != nil {
		return 0, fmt.Errorf("ledger: versions to map: %w", err)
	}
	return legacy, nil
}

// Untied counts the live pay parts from before the desired state that no
// group holds: their entries, mapped, fall in other groups (a rate or a
// rule changed since they were paid). Planning then would pay them twice.
func (l *Ledger) Untied(ctx context.Context) (int, error) {
	var n int
	err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM pay_parts p JOIN batches b ON b.id = p.batch_id
		WHERE p.group_id IS NULL AND p.state IN ('created', 'pending') AND `+livePartsWhere+`
			AND NOT EXISTS (SELECT 1 FROM pay_part_entries pe JOIN entries e ON e.id = pe.entry_id WHERE pe.pay_part_id = p.id AND e.legacy = 1)
			AND EXISTS (SELECT 1 FROM pay_part_entries pe JOIN versions v ON v.entry = pe.entry_id WHERE pe.pay_part_id = p.id)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("ledger: pay parts from before: %w", err)
	}
	return n, nil
}

// GroupChange is the reconciler's decision for one group.
type GroupChange struct {
	Group   int64
	Version int64   // the group's version it was planned on
	Replace []int64 // the live pay parts it was planned on, all replaced
	Create  []paysync.PlannedPayPart
	// Beside: the creates go beside the live pay parts, which stay (a
	// payroll server without a delete mutation: a difference); Replace is
	// then only checked.
	Beside bool
	// Clean: the group is as desired: only its dirty mark is cleared.
	Clean bool
}

// ErrStale: a group changed since it was planned; plan it again.
var ErrStale = errors.New("ledger: the group changed since it was planned")

// ApplyPlan records the changes of one company's groups in one
// transaction: those whose version or live pay parts changed since they
// were planned are left dirty (stale, counted), the others' live pay parts
// are replaced (never sent ones are simply not sent; created ones are
// deleted by the sender before the new ones go out) and their new pay
// parts go into batches of at most batchSize. It returns the new batches.
func (l *Ledger) ApplyPlan(ctx context.Context, company string, source int64, changes []GroupChange, batchSize int) (batches []int64, stale int, err error) {
	if batchSize <= 0 {
		batchSize = 100
	}
	err = l.tx(ctx, "apply plan", func(tx *sql.Tx) error {
		batches, stale = nil, 0
		st := l.stmts(ctx, tx)
		defer st.close()
		now := l.ts()
		var apply []GroupChange
		for _, c := range changes {
			var version int64
			var frozen bool
			if err := st.queryRow(`SELECT g.version, `+frozenGroup+` FROM groups g WHERE g.id = ?`, c.Group).Scan(&version, &frozen); err != nil {
				return err
			}
			if version != c.Version || frozen {
				stale++
				continue
			}
			live, err := liveOfGroup(ctx, st, c.Group)
			if err != nil {
				return err
			}
			ids := make([]int64, len(live))
			busy := false
			for i, lp := range live {
				ids[i] = lp.ID
				busy = busy || lp.BatchState == paysync.BatchSending && !c.Clean
			}
			if busy || !slices.Equal(ids, c.Replace) {
				stale++
				continue
			}
			if _, err := st.exec(`UPDATE groups SET dirty = 0 WHERE id = ?`, c.Group); err != nil {
				return err
			}
			if !c.Clean {
				apply = append(apply, c)
			}
		}
		if len(apply) == 0 {
			return nil
		}
		var replaced, creates int
		for i, c := range apply {
			if c.Beside {
				apply[i].Replace = nil
			}
			replaced += len(apply[i].Replace)
			creates += len(c.Create)
		}
		res, err := st.exec(`INSERT INTO corrections (source_id, company_id, entries, superseded, created_at) VALUES (?, ?, ?, ?, ?)`,
			source, company, len(apply), replaced, now)
		if err != nil {
			return err
		}
		unit, _ := res.LastInsertId()
		deletes := false
		for _, c := range apply {
			for _, id := range c.Replace {
				res, err := st.exec(`UPDATE pay_parts SET state = 'deleted', superseded_by = ?, updated_at = ? WHERE id = ? AND state = 'pending'`, unit, now, id)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 0 {
					deletes = true
					if _, err := st.exec(`UPDATE pay_parts SET superseded_by = ?, updated_at = ? WHERE id = ?`, unit, now, id); err != nil {
						return err
					}
				}
			}
		}
		var bid int64
		n := 0
		newBatch := func() error {
			res, err := st.exec(`INSERT INTO batches (company_id, source_id, state, created_at, updated_at, correction_id) VALUES (?, ?, 'pending', ?, ?, ?)`,
				company, nullID(source), now, now, unit)
			if err != nil {
				return err
			}
			bid, _ = res.LastInsertId()
			batches = append(batches, bid)
			n = 0
			return nil
		}
		if creates == 0 && deletes {
			// Only deletes: an empty batch carries them to the sender.
			if err := newBatch(); err != nil {
				return err
			}
		}
		for _, c := range apply {
			for _, pp := range c.Create {
				if bid == 0 || n >= batchSize {
					if err := newBatch(); err != nil {
						return err
					}
				}
				if _, err := st.exec(`INSERT INTO pay_parts (`+payPartCols+`, group_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
					bid, n, company, pp.EmployeeID, pp.EmployeeName, pp.Code, decText(pp.Units), decText(pp.Rate), decText(pp.Amount),
					pp.Description, pp.Rule, now, c.Group); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return batches, stale, err
}

// Target names what an operation changes: one import, batches, or the
// entries of a period (of one company, or all).
type Target struct {
	Import  int64
	Batches []int64
	Period  *paysync.Period
	Company string
	// Except, in a replay, are entries it leaves as they are (the current
	// rules refuse them).
	Except []int64
}

func (sc Target) String() string {
	switch {
	case sc.Import != 0:
		return fmt.Sprintf("import %d", sc.Import)
	case len(sc.Batches) > 0:
		return fmt.Sprintf("batch %d", sc.Batches[0])
	case sc.Period != nil && sc.Company != "":
		return fmt.Sprintf("period %s of company %s", sc.Period, sc.Company)
	case sc.Period != nil:
		return fmt.Sprintf("period %s", sc.Period)
	}
	return "nothing"
}

// targetEntries is the SQL selecting the entries (their ids) an operation
// on sc touches, with its arguments: an import's (any version of it), the
// counting entries of the groups of batches' pay parts (and those their
// revert excluded), a period's (by their lines' groups, and by date).
func targetEntries(sc Target, replay bool) (string, []any) {
	switch {
	case sc.Import != 0:
		return `SELECT entry FROM versions WHERE source_id = ? UNION SELECT id FROM entries WHERE source_id = ? AND note = 'held'
			UNION SELECT entry FROM entry_corrections WHERE source_id = ? AND state = 'pending'`, []any{sc.Import, sc.Import, sc.Import}
	case len(sc.Batches) > 0:
		// The entries behind the batches' live pay parts: those counting
		// in their groups (and, from before the desired state, those
		// linked to them), and those the batches' revert excluded.
		in := placeholders(len(sc.Batches))
		var args []any
		for range 3 {
			for _, b := range sc.Batches {
				args = append(args, b)
			}
		}
		return `SELECT v.entry FROM lines l JOIN versions v ON v.id = l.version WHERE l.counts = 1 AND l.group_id IN (
				SELECT p.group_id FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE p.batch_id IN (` + in + `) AND p.group_id IS NOT NULL
					AND (` + heldPartsWhere + ` OR p.state = 'rejected'))
			UNION SELECT entry FROM exclusions WHERE by IN (` + in + `)
			UNION SELECT pe.entry_id FROM pay_part_entries pe JOIN pay_parts p ON p.id = pe.pay_part_id JOIN batches b ON b.id = p.batch_id
				WHERE p.batch_id IN (` + in + `) AND ` + heldPartsWhere, args
	case sc.Period != nil:
		// The entries counting in the period's groups (of the company),
		// and, dated in it (their current version), those a period's
		// revert excluded and (for a replay: mapped again under the current
		// rules) every other.
		first, last := sc.Period.First().Format(time.DateOnly), sc.Period.Last().Format(time.DateOnly)
		company, dated := "", `SELECT e.id FROM entries e WHERE e.entry_date BETWEEN ? AND ?`
		args := []any{last, first}
		if sc.Company != "" {
			company = " AND g.company_id = ?"
			dated += ` AND EXISTS (SELECT 1 FROM versions v JOIN lines l ON l.version = v.id JOIN groups g ON g.id = l.group_id WHERE v.entry = e.id AND g.company_id = ?)`
			args = append(args, sc.Company)
		}
		q := `SELECT v.entry FROM lines l JOIN versions v ON v.id = l.version JOIN groups g ON g.id = l.group_id
			WHERE l.counts = 1 AND g.first_day <= ? AND g.last_day >= ?` + company + ` UNION ` + dated
		if !replay {
			q += ` AND EXISTS (SELECT 1 FROM exclusions x WHERE x.entry = e.id AND x.by = -1)`
		}
		args = append(args, first, last)
		if sc.Company != "" {
			args = append(args, sc.Company)
		}
		return q, args
	}
	return `SELECT id FROM entries WHERE 0`, nil
}

// TargetEntries counts the entries a revert (or a replay) of sc touches.
func (l *Ledger) TargetEntries(ctx context.Context, sc Target, replay bool) (int, error) {
	q, args := targetEntries(sc, replay)
	var n int
	if err := l.rdb.QueryRowContext(ctx, `SELECT count(*) FROM (`+q+`)`, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger: entries of %s: %w", sc, err)
	}
	return n, nil
}

// Revert changes the desired state as an undo of sc, in one transaction:
// an import's versions stop counting (its entries fall back to their
// versions before it); the entries of batches or a period are excluded
// until replayed or listed again. Entries dated in a closed period are
// never changed. It returns how many entries it changed.
func (l *Ledger) Revert(ctx context.Context, sc Target) (int, error) {
	return l.change(ctx, "revert "+sc.String(), sc, false, func(st *stmts, sub string, args []any) error {
		if sc.Import != 0 {
			// Its versions stop counting; groups of a closed period are
			// frozen (their change is late: listed, never sent there).
			_, err := st.exec(`UPDATE sources SET reverted = 1 WHERE id = ?`, sc.Import)
			return err
		}
		mark := int64(-1)
		if len(sc.Batches) > 0 {
			mark = sc.Batches[0]
		}
		_, err := st.exec(`INSERT OR IGNORE INTO exclusions (entry, by) SELECT id, ? FROM entries WHERE id IN (`+sub+`)`, append([]any{mark}, args...)...)
		return err
	})
}

// ErrClosedPeriod: an operation would change a closed period.
var ErrClosedPeriod = errors.New("closed period")

// Replay changes the desired state as a redo of sc, in one transaction:
// an import counts again, excluded entries of batches or a period count
// again. The rules' new lines come through Relines.
func (l *Ledger) Replay(ctx context.Context, sc Target) (int, error) {
	return l.change(ctx, "replay "+sc.String(), sc, true, func(st *stmts, sub string, args []any) error {
		if sc.Import != 0 {
			if _, err := st.exec(`UPDATE sources SET reverted = 0 WHERE id = ?`, sc.Import); err != nil {
				return err
			}
			// Its entries whose current version it is count again (a
			// later import's version stays what counts for the others).
			_, err := st.exec(`DELETE FROM exclusions WHERE entry IN (`+sub+`)
				AND (SELECT v.source_id FROM versions v JOIN sources s ON s.id = v.source_id WHERE v.entry = exclusions.entry AND s.reverted = 0 AND v.pending = 0 AND v.status <> 'rejected'
					ORDER BY v.source_id DESC, v.id DESC LIMIT 1) = ?`, append(args, sc.Import)...)
			return err
		}
		// A period's entries count again whatever excluded them; a
		// batch's, from the batch's revert only.
		except, eargs := "", []any{}
		if len(sc.Except) > 0 {
			except = ` AND entry NOT IN (` + placeholders(len(sc.Except)) + `)`
			for _, e := range sc.Except {
				eargs = append(eargs, e)
			}
		}
		if len(sc.Batches) == 0 {
			_, err := st.exec(`DELETE FROM exclusions WHERE entry IN (`+sub+`)`+except, append(args, eargs...)...)
			return err
		}
		var by []any
		for _, b := range sc.Batches {
			by = append(by, b)
		}
		_, err := st.exec(`DELETE FROM exclusions WHERE by IN (`+placeholders(len(by))+`) AND entry IN (`+sub+`)`+except, append(append(by, args...), eargs...)...)
		return err
	})
}

// CheckOpen refuses an operation on a period that overlaps a closed one
// (ErrClosedPeriod): it would change nothing in payroll, only its desired
// state behind the operator's back.
func (l *Ledger) CheckOpen(ctx context.Context, sc Target) error {
	return checkOpen(ctx, l.rdb, sc)
}

func checkOpen(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, sc Target) error {
	if sc.Period == nil {
		return nil
	}
	var closed string
	err := q.QueryRowContext(ctx, `SELECT period FROM closed_periods WHERE first_day <= ? AND last_day >= ? ORDER BY first_day LIMIT 1`,
		sc.Period.Last().Format(time.DateOnly), sc.Period.First().Format(time.DateOnly)).Scan(&closed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %s overlaps period %s, closed: reopen it first (paysync periods open %s)", ErrClosedPeriod, sc.Period, closed, closed)
}

// change runs fn and recounts the entries of sc.
func (l *Ledger) change(ctx context.Context, op string, sc Target, replay bool, fn func(st *stmts, sub string, args []any) error) (int, error) {
	var n int
	err := l.tx(ctx, op, func(tx *sql.Tx) error {
		st := l.stmts(ctx, tx)
		defer st.close()
		if err := checkOpen(ctx, st, sc); err != nil {
			return err
		}
		sub, args := targetEntries(sc, replay)
		ids, err := entryIDs(ctx, tx, sub, args)
		if err != nil {
			return err
		}
		if err := fn(st, sub, args); err != nil {
			return err
		}
		d := newDesired(st)
		for _, id := range ids {
			d.touch(id)
		}
		n = len(ids)
		if err := d.flush(); err != nil {
			return err
		}
		if !replay {
			return nil
		}
		// A replay plans its groups again even where their totals stay:
		// a pay part payroll refused is sent again once the cause is fixed.
		_, err = st.exec(`UPDATE groups SET dirty = 1 WHERE dirty = 0 AND id IN (SELECT l.group_id FROM lines l JOIN versions v ON v.id = l.version
			WHERE l.counts = 1 AND v.entry IN (`+sub+`))`, args...)
		return err
	})
	return n, err
}

func entryIDs(ctx context.Context, q querier, sub string, args []any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, sub, args...)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows, "entries")
}

// Relining is a version to map again under the current rules.
type Relining struct {
	Unabsorbed
}

// Relinings lists the current versions of sc's entries (an import's: its
// own versions), to map again, after after (paging), at most limit.
func (l *Ledger) Relinings(ctx context.Context, sc Target, after int64, limit int) ([]Unabsorbed, error) {
	sub, args := targetEntries(sc, true)
	q := `SELECT v.entry, 0, v.id, v.source_id, s.name, v.line, v.content_hash, v.data FROM versions v JOIN sources s ON s.id = v.source_id
		JOIN entries e ON e.id = v.entry
		WHERE v.entry IN (` + sub + `) AND v.pending = 0 AND v.id > ?`
	if sc.Import != 0 {
		q += ` AND v.source_id = ?`
		args = append(args, after, sc.Import)
	} else {
		// The current version, and a later one the rules refused (which
		// the current rules may take now).
		q += ` AND (v.id = (SELECT v2.id FROM versions v2 JOIN sources s2 ON s2.id = v2.source_id WHERE v2.entry = v.entry AND s2.reverted = 0 AND v2.pending = 0
				ORDER BY v2.source_id DESC, v2.id DESC LIMIT 1)
			OR v.id = (SELECT v2.id FROM versions v2 JOIN sources s2 ON s2.id = v2.source_id WHERE v2.entry = v.entry AND s2.reverted = 0 AND v2.pending = 0
				AND v2.status <> 'rejected' ORDER BY v2.source_id DESC, v2.id DESC LIMIT 1))`
		args = append(args, after)
	}
	q += ` ORDER BY v.id LIMIT ?`
	args = append(args, limit)
	rows, err := l.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: versions of %s: %w", sc, err)
	}
	defer rows.Close()
	var out []Unabsorbed
	for rows.Next() {
		var u Unabsorbed
		if err := rows.Scan(&u.Entry, &u.Correction, &u.Version, &u.SourceID, &u.Source, &u.Line, &u.Hash, &u.Data); err != nil {
			return nil, fmt.Errorf("ledger: versions of %s: %w", sc, err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// Reline replaces the lines of versions with what the current rules make
// of them, and recounts their entries, in one transaction.
func (l *Ledger) Reline(ctx context.Context, as []Absorbed) error {
	return l.tx(ctx, "map again", func(tx *sql.Tx) error {
		st := l.stmts(ctx, tx)
		defer st.close()
		d := newDesired(st)
		for _, a := range as {
			if err := d.dropLines(a.Version); err != nil {
				return err
			}
			if _, err := st.exec(`UPDATE versions SET status = ?, note = ? WHERE id = ?`, a.Status, a.Note, a.Version); err != nil {
				return err
			}
			if err := d.addLines(a.Version, a.Lines); err != nil {
				return err
			}
			d.touch(a.Entry)
		}
		return d.flush()
	})
}

// frozenGroupIDs selects the groups of closed periods.
const frozenGroupIDs = `SELECT g.id FROM groups g WHERE ` + frozenGroup

// freeze undoes, for groups whose period was closed after they were
// planned, what a plan recorded and has not begun to send: its new pay
// parts are not sent, the pay parts it replaces stay. where selects the
// plan's pay parts (args follow). It reports whether it changed anything;
// the groups are then planned again (and shown as late).
func freeze(ctx context.Context, tx *sql.Tx, now, newParts, replaced string, newArg, replacedArg any) (bool, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE groups SET dirty = 1 WHERE id IN (
			SELECT group_id FROM pay_parts WHERE (`+newParts+`) AND state = 'pending' AND group_id IN (`+frozenGroupIDs+`)
			UNION SELECT group_id FROM pay_parts WHERE (`+replaced+`) AND state = 'created' AND delete_attempt IS NULL AND group_id IN (`+frozenGroupIDs+`))`,
		newArg, replacedArg); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE pay_parts SET state = 'deleted', error = 'not sent: its period was closed after it was planned', updated_at = ?
		WHERE (`+newParts+`) AND state = 'pending' AND group_id IN (`+frozenGroupIDs+`)`, now, newArg)
	if err != nil {
		return false, err
	}
	n1, _ := res.RowsAffected()
	res, err = tx.ExecContext(ctx, `UPDATE pay_parts SET superseded_by = NULL, updated_at = ?
		WHERE (`+replaced+`) AND state = 'created' AND delete_attempt IS NULL AND group_id IN (`+frozenGroupIDs+`)`, now, replacedArg)
	if err != nil {
		return false, err
	}
	n2, _ := res.RowsAffected()
	return n1+n2 > 0, nil
}

// frozen reports whether freeze would change anything: checked in the
// transaction that begins a send (the freeze itself is committed before,
// in a transaction of its own, so that a refusal does not roll it back).
func frozen(ctx context.Context, tx *sql.Tx, newParts, replaced string, newArg, replacedArg any) (bool, error) {
	var n bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pay_parts WHERE (`+newParts+`) AND state = 'pending' AND group_id IN (`+frozenGroupIDs+`))
		OR EXISTS (SELECT 1 FROM pay_parts WHERE (`+replaced+`) AND state = 'created' AND delete_attempt IS NULL AND group_id IN (`+frozenGroupIDs+`))`,
		newArg, replacedArg).Scan(&n)
	return n, err
}

// The pay parts of batch id (its new ones) and those its plan replaces.
const (
	batchNewParts      = `batch_id = ?`
	batchReplacedParts = `superseded_by = (SELECT correction_id FROM batches WHERE id = ?)`
	// the created pay parts of batch id that a plan replaces (their delete)
	batchNoParts     = `0 AND ? IS NULL`
	batchSupersedeOf = `batch_id = ? AND superseded_by IS NOT NULL`
)

// Freeze commits freeze for batch id before a send of it begins: its new
// pay parts and those it replaces (create), or the replaced pay parts it
// holds (deleting: the delete of a plan).
func (l *Ledger) freezeBatch(ctx context.Context, id int64, deleting bool) (changed bool, err error) {
	err = l.tx(ctx, "freeze closed periods", func(tx *sql.Tx) error {
		var err error
		if deleting {
			changed, err = freeze(ctx, tx, l.ts(), batchNoParts, batchSupersedeOf, nil, id)
		} else {
			changed, err = freeze(ctx, tx, l.ts(), batchNewParts, batchReplacedParts, id, id)
		}
		return err
	})
	return changed, err
}

// FreezeUnit is freeze for the whole plan (unit) before its deletes begin.
func (l *Ledger) FreezeUnit(ctx context.Context, unit int64) error {
	return l.tx(ctx, "freeze closed periods", func(tx *sql.Tx) error {
		_, err := freeze(ctx, tx, l.ts(), `batch_id IN (SELECT id FROM batches WHERE correction_id = ?)`, `superseded_by = ?`, unit, unit)
		return err
	})
}
