package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/paysync/paysync"
)

// ClosedPeriod is a period an operator closed once payroll had run.
type ClosedPeriod struct {
	Period   paysync.Period `json:"period"`
	ClosedAt time.Time      `json:"closed_at"`
	Note     string         `json:"note,omitempty"`
}

// ClosedPeriods lists the closed periods, earliest first.
func (l *Ledger) ClosedPeriods(ctx context.Context) ([]ClosedPeriod, error) {
	rows, err := l.rdb.QueryContext(ctx, `SELECT period, closed_at, note FROM closed_periods ORDER BY first_day, last_day`)
	if err != nil {
		return nil, fmt.Errorf("ledger: closed periods: %w", err)
	}
	defer rows.Close()
	var out []ClosedPeriod
	for rows.Next() {
		var p, at string
		var c ClosedPeriod
		if err := rows.Scan(&p, &at, &c.Note); err != nil {
			return nil, fmt.Errorf("ledger: closed periods: %w", err)
		}
		if c.Period, err = paysync.ParsePeriod(p); err != nil {
			return nil, fmt.Errorf("ledger: closed period %q: %w", p, err)
		}
		c.ClosedAt = parseTS(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// ClosePeriod closes p (again: nothing changes) and reports whether it was
// open.
func (l *Ledger) ClosePeriod(ctx context.Context, p paysync.Period, note string) (bool, error) {
	var n int64
	err := l.tx(ctx, "close period", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO closed_periods (period, first_day, last_day, closed_at, note) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (period) DO NOTHING`, p.String(), p.First().Format(time.DateOnly), p.Last().Format(time.DateOnly), l.ts(), note)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

// ReopenPeriod opens p again and reports whether it was closed.
func (l *Ledger) ReopenPeriod(ctx context.Context, p paysync.Period) (bool, error) {
	var n int64
	err := l.tx(ctx, "reopen period", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM closed_periods WHERE period = ?`, p.String())
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		// Its groups catch up with their desired state at the next reconcile.
		_, err = tx.ExecContext(ctx, `UPDATE groups SET dirty = 1 WHERE first_day <= ? AND last_day >= ?`,
			p.Last().Format(time.DateOnly), p.First().Format(time.DateOnly))
		return err
	})
	return n == 1, err
}

// PeriodTotal is what payroll holds (or will: pending) for one company,
// source and month, from the ledger.
type PeriodTotal struct {
	CompanyID  string          `json:"company_id"`
	Origin     string          `json:"source"` // the sources (origins) of the entries that count, comma-separated
	Period     string          `json:"period"` // the pay period (2026-11, 2026-W45)
	PayParts   int             `json:"pay_parts"`
	Pending    int             `json:"pending"` // not created yet
	Units      decimal.Decimal `json:"units"`
	Amount     decimal.Decimal `json:"amount"`
	Entries    int             `json:"entries"`
	LastImport time.Time       `json:"last_import"`
	Status     string          `json:"status"` // open, closed, or partly closed (a closed week or range in it)
}

// periodStatus is a month's status among the closed periods.
func periodStatus(closed []ClosedPeriod, month string) string {
	m, err := paysync.ParsePeriod(month)
	if err != nil {
		return "open"
	}
	status := "open"
	for _, c := range closed {
		switch {
		case !c.Period.Overlaps(m):
		case !c.Period.First().After(m.First()) && !c.Period.Last().Before(m.Last()):
			return "closed"
		default:
			status = "partly closed"
		}
	}
	return status
}

// PeriodTotals sums the live pay parts (created or pending, not replaced)
// per company and pay period of their groups, with the entries that count
// in those groups and the origins (sources) they came from.
func (l *Ledger) PeriodTotals(ctx context.Context) ([]PeriodTotal, error) {
	closed, err := l.ClosedPeriods(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := l.rdb.QueryContext(ctx, `SELECT g.company_id, g.period, p.state, coalesce(p.units, ''), coalesce(p.amount, ''), g.lines,
			coalesce((SELECT group_concat(DISTINCT e.origin) FROM lines x JOIN versions v ON v.id = x.version JOIN entries e ON e.id = v.entry
				WHERE x.group_id = g.id AND x.counts = 1), ''),
			coalesce((SELECT max(s.received_at) FROM lines x JOIN versions v ON v.id = x.version JOIN sources s ON s.id = v.source_id
				WHERE x.group_id = g.id AND x.counts = 1), '')
		FROM pay_parts p JOIN batches b ON b.id = p.batch_id JOIN groups g ON g.id = p.group_id
		WHERE `+livePartsWhere)
	if err != nil {
		return nil, fmt.Errorf("ledger: period totals: %w", err)
	}
	defer rows.Close()
	byKey := map[[3]string]*PeriodTotal{}
	counted := map[[3]string]map[string]bool{}
	for rows.Next() {
		var company, period, origins, at string
		var state paysync.PartState
		var units, amount string
		var entries int
		if err := rows.Scan(&company, &period, &state, &units, &amount, &entries, &origins, &at); err != nil {
			return nil, fmt.Errorf("ledger: period totals: %w", err)
		}
		k := [3]string{company, "", period}
		t := byKey[k]
		if t == nil {
			t = &PeriodTotal{CompanyID: company, Period: period}
			t.Status = periodStatus(closed, period)
			byKey[k], counted[k] = t, map[string]bool{}
		}
		for _, o := range strings.Split(origins, ",") {
			if o != "" && !counted[k][o] {
				counted[k][o] = true
				t.Origin = strings.TrimPrefix(t.Origin+","+o, ",")
			}
		}
		t.PayParts++
		if state == paysync.PartPending {
			t.Pending++
		}
		t.Entries += entries
		if u := textDec(sql.NullString{String: units, Valid: units != ""}); u.Valid {
			t.Units = t.Units.Add(u.Decimal)
		}
		if a := textDec(sql.NullString{String: amount, Valid: amount != ""}); a.Valid {
			t.Amount = t.Amount.Add(a.Decimal)
		}
		if ts := parseTS(at); ts.After(t.LastImport) {
			t.LastImport = ts
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]PeriodTotal, 0, len(byKey))
	for _, t := range byKey {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Period != b.Period {
			return a.Period > b.Period // the latest first
		}
		if a.CompanyID != b.CompanyID {
			return a.CompanyID < b.CompanyID
		}
		return a.Origin < b.Origin
	})
	return out, nil
}
