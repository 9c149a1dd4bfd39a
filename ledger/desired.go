package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// The desired state. Every import that lists an entry adds a version of it
// (versions); what the rules make of a version are its lines, each in a
// group (company × employee × code × rate × pay period). A line counts when
// its version is the entry's current one (the latest of an import not
// reverted), that version was mapped, and the entry is not excluded (by a
// batch's or a period's revert). A group's totals are the exact sums of
// the lines that count; they change only through recount, the one place
// that decides what counts, which marks the group dirty for the
// reconciler.

// GroupKey names a group.
type GroupKey struct {
	Company, Employee, Code string
	Rate                    string // decimal text, "-" without a rate
	Period                  paysync.Period
	Own                     string // aggregate: false: the entry's key (one group per line)
}

// NewLine is one line of a version: its group and exact quantities.
type NewLine struct {
	Group        GroupKey
	Seconds      decimal.NullDecimal // hours as exact seconds, when units come from hours
	Units        decimal.NullDecimal
	Amount       decimal.NullDecimal
	EmployeeName string
	Description  string
	Rule         string
}

// Unabsorbed is what intake recorded that is not yet in the desired
// state: a held entry (its first or a re-listed version), a pending
// correction (a new version), or a version from before the desired state
// (Legacy) whose lines were never mapped.
type Unabsorbed struct {
	Entry      int64 // entries.id
	Correction int64 // entry_corrections.id (a correction)
	Version    int64 // versions.id (a legacy version)
	SourceID   int64
	Source     string // the source's name, for problems
	Line       int
	Hash       string
	Data       []byte
}

// Absorbed is an Unabsorbed as the rules mapped it.
type Absorbed struct {
	Unabsorbed
	Status paysync.EntryStatus
	Note   string
	Date   string // the version's date (a tombstone: none)
	Lines  []NewLine
	Reject *NewReject // why the rules refuse it
}

// Unabsorbed returns up to limit of what is not yet in the desired state,
// the versions from before first, then in the order intake recorded it.
func (l *Ledger) Unabsorbed(ctx context.Context, limit int) ([]Unabsorbed, error) {
	return l.UnabsorbedAfter(ctx, Cursor{}, limit)
}

// Cursor is where a reading of what is not yet absorbed goes on from: past
// what the reader left held (a company payroll cannot be read for now).
type Cursor struct{ Version, Entry, Correction int64 }

// Next is the cursor past us.
func (c Cursor) Next(us []Unabsorbed) Cursor {
	for _, u := range us {
		switch {
		case u.Version != 0:
			c.Version = max(c.Version, u.Version)
		case u.Correction != 0:
			c.Correction = max(c.Correction, u.Correction)
		default:
			c.Entry = max(c.Entry, u.Entry)
		}
	}
	return c
}

// UnabsorbedAfter is Unabsorbed past the cursor.
func (l *Ledger) UnabsorbedAfter(ctx context.Context, after Cursor, limit int) ([]Unabsorbed, error) {
	var out []Unabsorbed
	scan := func(q string, args ...any) error {
		rows, err := l.rdb.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var u Unabsorbed
			if err := rows.Scan(&u.Entry, &u.Correction, &u.Version, &u.SourceID, &u.Source, &u.Line, &u.Hash, &u.Data); err != nil {
				return err
			}
			out = append(out, u)
		}
		return rows.Err()
	}
	if err := scan(`SELECT v.entry, 0, v.id, v.source_id, s.name, v.line, v.content_hash, v.data
		FROM versions v JOIN sources s ON s.id = v.source_id WHERE v.pending = 1 AND v.id > ? ORDER BY v.id LIMIT ?`, after.Version, limit); err != nil {
		return nil, fmt.Errorf("ledger: versions to map: %w", err)
	}
	if len(out) > 0 {
		return out, nil
	}
	if err := scan(`SELECT e.id, 0, 0, e.source_id, s.name, e.line, e.content_hash, e.data
		FROM entries e JOIN sources s ON s.id = e.source_id WHERE e.note = 'held' AND e.status = 'mapped' AND e.id > ? ORDER BY e.id LIMIT ?`, after.Entry, limit); err != nil {
		return nil, fmt.Errorf("ledger: held entries: %w", err)
	}
	if len(out) > 0 {
		return out, nil
	}
	if err := scan(`SELECT c.entry, c.id, 0, c.source_id, s.name, c.line, c.content_hash, c.data
		FROM entry_corrections c JOIN sources s ON s.id = c.source_id WHERE c.state = 'pending' AND c.id > ? ORDER BY c.id LIMIT ?`, after.Correction, limit); err != nil {
		return nil, fmt.Errorf("ledger: pending corrections: %w", err)
	}
	return out, nil
}

// Absorb takes what the rules made of as into the desired state, in one
// transaction: a version each (lines and all), the entries recounted. What
// another process absorbed meanwhile is left alone.
func (l *Ledger) Absorb(ctx context.Context, as []Absorbed) error {
	return l.tx(ctx, "absorb", func(tx *sql.Tx) error {
		st := l.stmts(ctx, tx)
		defer st.close()
		d := newDesired(st)
		legacy := map[int64]bool{}
		for _, a := range as {
			var version int64
			switch {
			case a.Version != 0:
				res, err := st.exec(`UPDATE versions SET pending = 0, status = ?, note = ? WHERE id = ? AND pending = 1`, a.Status, a.Note, a.Version)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 0 {
					continue
				}
				version = a.Version
				legacy[a.Entry] = true
			case a.Correction != 0:
				res, err := st.exec(`UPDATE entry_corrections SET state = 'applied' WHERE id = ? AND state = 'pending'`, a.Correction)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 0 {
					continue
				}
				if version, err = d.addVersion(a); err != nil {
					return err
				}
			default:
				res, err := st.exec(`UPDATE entries SET note = ?, status = ? WHERE id = ? AND note = ? AND content_hash = ?`, a.Note, a.Status, a.Entry, HeldNote, a.Hash)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 0 {
					continue
				}
				var earlier bool
				if err := st.queryRow(`SELECT EXISTS (SELECT 1 FROM versions WHERE entry = ?)`, a.Entry).Scan(&earlier); err != nil {
					return err
				}
				if version, err = d.addVersion(a); err != nil {
					return err
				}
				if !earlier {
					// An entry's first version: it counts when it was
					// mapped and its import is not reverted (the common
					// case, without recount's reads).
					reverted, err := d.reverted(a.SourceID)
					if err != nil {
						return err
					}
					if err := d.addLinesCounting(version, a.Lines, a.Status == paysync.EntryMapped && !reverted); err != nil {
						return err
					}
					if a.Reject != nil {
						if err := d.reject(a); err != nil {
							return err
						}
					}
					continue
				}
			}
			if a.Reject != nil {
				if err := d.reject(a); err != nil {
					return err
				}
			}
			if err := d.addLines(version, a.Lines); err != nil {
				return err
			}
			if a.Version == 0 {
				// Listed again: a batch's or a period's revert no longer
				// keeps it out.
				if _, err := st.exec(`DELETE FROM exclusions WHERE entry = ?`, a.Entry); err != nil {
					return err
				}
				d.touch(a.Entry)
			}
		}
		for entry := range legacy {
			var left int
			if err := st.queryRow(`SELECT count(*) FROM versions WHERE entry = ? AND pending = 1`, entry).Scan(&left); err != nil {
				return err
			}
			if left == 0 {
				d.touch(entry)
				d.legacy = append(d.legacy, entry)
			}
		}
		return d.flush()
	})
}

// desired is one transaction's change of the desired state: the entries
// to recount and the groups' changes, applied by flush.
type desired struct {
	st      *stmts
	now     string
	groups  map[GroupKey]int64
	deltas  map[int64]*groupDelta
	entries map[int64]bool
	legacy  []int64 // entries from before whose pay parts are tied to their groups
	rev     map[int64]bool
}

type groupDelta struct {
	seconds, units, amount decimal.Decimal
	lines                  int
}

func newDesired(st *stmts) *desired {
	return &desired{st: st, now: time.Now().UTC().Format(tsLayout), groups: map[GroupKey]int64{}, deltas: map[int64]*groupDelta{}, entries: map[int64]bool{}, rev: map[int64]bool{}}
}

func (d *desired) touch(entry int64) { d.entries[entry] = true }

// addVersion stores a's content as a new version of its entry.
func (d *desired) addVersion(a Absorbed) (int64, error) {
	res, err := d.st.exec(`INSERT INTO versions (entry, source_id, line, content_hash, data, status, note, entry_date)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		a.Entry, a.SourceID, a.Line, a.Hash, a.Data, a.Status, a.Note, a.Date)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// addLines stores a version's lines (not counting yet: recount decides).
func (d *desired) addLines(version int64, lines []NewLine) error {
	return d.addLinesCounting(version, lines, false)
}

// addLinesCounting stores a version's lines, counting when counts (the
// caller decided as recount would: a new entry's first version).
func (d *desired) addLinesCounting(version int64, lines []NewLine, counts bool) error {
	for i, ln := range lines {
		g, err := d.group(ln)
		if err != nil {
			return err
		}
		seconds, units, amount := decText(ln.Seconds), decText(ln.Units), decText(ln.Amount)
		if _, err := d.st.exec(`INSERT INTO lines (version, seq, group_id, seconds, units, amount, counts) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			version, i, g, seconds, units, amount, counts); err != nil {
			return err
		}
		if counts {
			d.addDec(g, ln.Seconds, ln.Units, ln.Amount, 1)
		}
	}
	return nil
}

// reject records why the rules refuse a version.
func (d *desired) reject(a Absorbed) error {
	r := a.Reject
	_, err := d.st.exec(`INSERT INTO rejects (source_id, entry_id, line, field, message, hint, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		a.SourceID, r.EntryID, r.Line, r.Field, r.Message, r.Hint, d.now)
	return err
}

// reverted reports whether import source is reverted (cached for the
// transaction).
func (d *desired) reverted(source int64) (bool, error) {
	if r, ok := d.rev[source]; ok {
		return r, nil
	}
	var r bool
	if err := d.st.queryRow(`SELECT reverted FROM sources WHERE id = ?`, source).Scan(&r); err != nil {
		return false, err
	}
	d.rev[source] = r
	return r, nil
}

// dropLines removes a version's lines (they stop counting first).
func (d *desired) dropLines(version int64) error {
	rows, err := d.st.query(`SELECT group_id, seconds, units, amount FROM lines WHERE version = ? AND counts = 1`, version)
	if err != nil {
		return err
	}
	var ls []lineRow
	for rows.Next() {
		var lr lineRow
		if err := rows.Scan(&lr.group, &lr.seconds, &lr.units, &lr.amount); err != nil {
			rows.Close()
			return err
		}
		ls = append(ls, lr)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, lr := range ls {
		d.add(lr, -1)
	}
	_, err = d.st.exec(`DELETE FROM lines WHERE version = ?`, version)
	return err
}

type lineRow struct {
	version                int64
	seq                    int
	group                  int64
	seconds, units, amount sql.NullString
	counts                 bool
}

// group returns the id of ln's group, made when new.
func (d *desired) group(ln NewLine) (int64, error) {
	k := ln.Group
	if id, ok := d.groups[k]; ok {
		return id, nil
	}
	var id int64
	err := d.st.queryRow(`SELECT id FROM groups WHERE company_id = ? AND employee_id = ? AND code = ? AND rate = ? AND period = ? AND own = ?`,
		k.Company, k.Employee, k.Code, k.Rate, k.Period.String(), k.Own).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		res, err := d.st.exec(`INSERT INTO groups (company_id, employee_id, code, rate, period, first_day, last_day, own, employee_name, description, rule, from_hours)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.Company, k.Employee, k.Code, k.Rate, k.Period.String(),
			k.Period.First().Format(time.DateOnly), k.Period.Last().Format(time.DateOnly), k.Own, ln.EmployeeName, ln.Description, ln.Rule, ln.Seconds.Valid)
		if err != nil {
			return 0, err
		}
		id, err = res.LastInsertId()
		if err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, err
	}
	d.groups[k] = id
	return id, nil
}

// add adds (sign 1) or removes (-1) a line's quantities to its group.
func (d *desired) add(lr lineRow, sign int) {
	d.addDec(lr.group, textDec(lr.seconds), textDec(lr.units), textDec(lr.amount), sign)
}

func (d *desired) addDec(group int64, seconds, units, amount decimal.NullDecimal, sign int) {
	g := d.deltas[group]
	if g == nil {
		g = &groupDelta{}
		d.deltas[group] = g
	}
	s := decimal.NewFromInt(int64(sign))
	for _, x := range []struct {
		to *decimal.Decimal
		v  decimal.NullDecimal
	}{{&g.seconds, seconds}, {&g.units, units}, {&g.amount, amount}} {
		if x.v.Valid {
			*x.to = x.to.Add(x.v.Decimal.Mul(s))
		}
	}
	g.lines += sign
}

// recount decides, for each entry touched, which of its lines count: those
// of its current version (the latest from an import not reverted, mapped,
// the entry not excluded). It is the one definition of what counts.
func (d *desired) recount(entry int64) error {
	var cur sql.NullInt64
	var status string
	err := d.st.queryRow(`SELECT v.id, v.status FROM versions v JOIN sources s ON s.id = v.source_id
		WHERE v.entry = ? AND s.reverted = 0 AND v.pending = 0 AND v.status <> 'rejected' ORDER BY v.source_id DESC, v.id DESC LIMIT 1`, entry).Scan(&cur, &status)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	var excluded bool
	if err := d.st.queryRow(`SELECT EXISTS (SELECT 1 FROM exclusions WHERE entry = ?)`, entry).Scan(&excluded); err != nil {
		return err
	}
	counts := cur.Valid && status == string(paysync.EntryMapped) && !excluded
	rows, err := d.st.query(`SELECT l.version, l.seq, l.group_id, l.seconds, l.units, l.amount, l.counts
		FROM lines l JOIN versions v ON v.id = l.version WHERE v.entry = ?`, entry)
	if err != nil {
		return err
	}
	var change []lineRow
	for rows.Next() {
		var lr lineRow
		if err := rows.Scan(&lr.version, &lr.seq, &lr.group, &lr.seconds, &lr.units, &lr.amount, &lr.counts); err != nil {
			rows.Close()
			return err
		}
		if want := counts && lr.version == cur.Int64; want != lr.counts {
			change = append(change, lr)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, lr := range change {
		sign := 1
		if lr.counts {
			sign = -1
		}
		if _, err := d.st.exec(`UPDATE lines SET counts = ? WHERE version = ? AND seq = ?`, !lr.counts, lr.version, lr.seq); err != nil {
			return err
		}
		d.add(lr, sign)
	}
	// The entry's row shows its current version (what intake compares a
	// new listing with).
	if cur.Valid {
		_, err = d.st.exec(`UPDATE entries SET source_id = v.source_id, line = v.line, content_hash = v.content_hash, data = v.data,
			status = v.status, note = v.note, entry_date = coalesce(nullif(v.entry_date, ''), entries.entry_date)
			FROM versions v WHERE v.id = ? AND entries.id = ? AND entries.note <> ?`, cur.Int64, entry, HeldNote)
	} else {
		// No version counts: a listing of it is taken again, whatever its content.
		_, err = d.st.exec(`UPDATE entries SET status = 'skipped', note = 'reverted', content_hash = '' WHERE id = ? AND note <> ?`, entry, HeldNote)
	}
	return err
}

// flush recounts the entries touched and applies the groups' changes:
// their totals, a new version, dirty.
func (d *desired) flush() error {
	ids := make([]int64, 0, len(d.entries))
	for e := range d.entries {
		ids = append(ids, e)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, e := range ids {
		if err := d.recount(e); err != nil {
			return err
		}
	}
	for _, e := range d.legacy {
		if err := d.tieLegacy(e); err != nil {
			return err
		}
	}
	// Pay parts from before the desired state left untied (their entries
	// mapped to other groups since: a rate or a rule changed) are tied when
	// their entries are mapped again (a replay with the rules they were
	// paid with).
	var untied bool
	if err := d.st.queryRow(`SELECT EXISTS (SELECT 1 FROM pay_parts WHERE group_id IS NULL AND state IN ('created', 'pending'))`).Scan(&untied); err != nil {
		return err
	}
	if untied {
		for _, e := range ids {
			if err := d.tieLegacy(e); err != nil {
				return err
			}
		}
	}
	gs := make([]int64, 0, len(d.deltas))
	for g := range d.deltas {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i] < gs[j] })
	for _, g := range gs {
		dl := d.deltas[g]
		var seconds, units, amount sql.NullString
		var n int
		if err := d.st.queryRow(`SELECT seconds, units, amount, lines FROM groups WHERE id = ?`, g).Scan(&seconds, &units, &amount, &n); err != nil {
			return err
		}
		n += dl.lines
		sum := func(cur sql.NullString, dv decimal.Decimal, any bool) any {
			if n <= 0 {
				return nil
			}
			v := decimal.Zero
			if cur.Valid {
				v, _ = decimal.NewFromString(cur.String)
			} else if dv.IsZero() && !any {
				return nil
			}
			return v.Add(dv).String()
		}
		if _, err := d.st.exec(`UPDATE groups SET seconds = ?, units = ?, amount = ?, lines = ?, version = version + 1,
				dirty_at = CASE WHEN dirty = 1 THEN dirty_at ELSE ? END, dirty = 1 WHERE id = ?`,
			sum(seconds, dl.seconds, false), sum(units, dl.units, false), sum(amount, dl.amount, false), max(n, 0), d.now, g); err != nil {
			return err
		}
	}
	return nil
}

// tieLegacy ties the pay parts of an entry from before the desired state
// (linked to it, live, of no group yet) to the group of its counting line
// with the same company, employee, code and rate.
func (d *desired) tieLegacy(entry int64) error {
	if _, err := d.st.exec(`UPDATE pay_parts SET group_id = (
			SELECT g.id FROM lines l JOIN versions v ON v.id = l.version JOIN groups g ON g.id = l.group_id
			WHERE v.entry = ? AND l.counts = 1 AND g.company_id = pay_parts.company_id AND g.employee_id = pay_parts.employee_id
				AND g.code = pay_parts.code AND g.rate = coalesce(pay_parts.rate, '-') LIMIT 1)
		WHERE group_id IS NULL AND id IN (SELECT pay_part_id FROM pay_part_entries WHERE entry_id = ?)`, entry, entry); err != nil {
		return err
	}
	// Groups its pay parts are now tied to are planned again.
	if _, err := d.st.exec(`UPDATE groups SET dirty = 1 WHERE id IN (SELECT p.group_id FROM pay_parts p JOIN pay_part_entries pe ON pe.pay_part_id = p.id WHERE pe.entry_id = ? AND p.group_id IS NOT NULL)`, entry); err != nil {
		return err
	}
	_, err := d.st.exec(`UPDATE entries SET legacy = 0 WHERE id = ?`, entry)
	return err
}
