package console

import (
	"net/http"
	"sort"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/shopspring/decimal"
)

// Periods: what payroll holds per company, source and month, and per
// employee × code within one.

type periodsData struct {
	Totals []ledger.PeriodTotal
	Closed []ledger.ClosedPeriod
}

func (s *Server) periods(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	totals, err := s.cfg.Ledger.PeriodTotals(ctx)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	closed, err := s.cfg.Ledger.ClosedPeriods(ctx)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.render(w, r, http.StatusOK, "periods", c, periodsData{Totals: totals, Closed: closed})
}

// employeeCode is one company × employee × code's live pay parts in a
// period.
type employeeCode struct {
	CompanyID, EmployeeID, EmployeeName, Code string
	PayParts, Pending                         int
	Units, Amount                             decimal.Decimal
}

type periodData struct {
	Scope  ledger.Scope
	Query  string // the revert's and replay's
	Action string // what they name ("period 2026-11 of company 1")
	Rows   []employeeCode
	Status string
}

// periodPage is one period (of a source and company, when given): its
// live pay parts per employee × code.
func (s *Server) periodPage(w http.ResponseWriter, r *http.Request, c who) {
	ctx := r.Context()
	q := r.URL.Query()
	t, err := parseTarget("revert", q)
	if err != nil || t.Period == "" {
		s.fail(w, r, http.StatusBadRequest, "name a period (2026-11, 2026-W45, 2026-11-02..2026-11-15)")
		return
	}
	sc := t.scope()
	l := s.cfg.Ledger
	entries, err := l.EntriesIn(ctx, sc)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	rows := make([]int64, len(entries))
	for i, e := range entries {
		rows[i] = e.Row
	}
	parts, err := l.PartsOfEntries(ctx, rows)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	by := map[string]*employeeCode{}
	for _, p := range parts {
		if sc.Company != "" && p.CompanyID != sc.Company {
			continue
		}
		k := p.CompanyID + "\x00" + p.EmployeeID + "\x00" + p.Code
		ec := by[k]
		if ec == nil {
			ec = &employeeCode{CompanyID: p.CompanyID, EmployeeID: p.EmployeeID, EmployeeName: p.EmployeeName, Code: p.Code}
			by[k] = ec
		}
		ec.PayParts++
		if p.State == paysync.PartPending {
			ec.Pending++
		}
		if p.Units.Valid {
			ec.Units = ec.Units.Add(p.Units.Decimal)
		}
		if p.Amount.Valid {
			ec.Amount = ec.Amount.Add(p.Amount.Decimal)
		}
	}
	// Its actions take the period of every source (of the company, when
	// one is named): a source's part of it is its import's.
	at := t
	at.Source = ""
	d := periodData{Scope: sc, Query: at.values().Encode(), Action: at.String(), Status: "open"}
	for _, ec := range by {
		d.Rows = append(d.Rows, *ec)
	}
	sort.Slice(d.Rows, func(i, j int) bool {
		a, b := d.Rows[i], d.Rows[j]
		if a.CompanyID != b.CompanyID {
			return a.CompanyID < b.CompanyID
		}
		if a.EmployeeName != b.EmployeeName {
			return a.EmployeeName < b.EmployeeName
		}
		return a.Code < b.Code
	})
	closed, err := l.ClosedPeriods(ctx)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	for _, cp := range closed {
		if cp.Period.Overlaps(sc.Period) {
			d.Status = "closed (" + cp.Period.String() + ")"
		}
	}
	s.render(w, r, http.StatusOK, "period", c, d)
}
