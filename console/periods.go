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
	Scope  ledger.Target
	Source string // the source the period page was reached from
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
	if sc.Period == nil {
		s.fail(w, r, http.StatusBadRequest, "name a period (2026-11, 2026-W45, 2026-11-02..2026-11-15)")
		return
	}
	by := map[string]*employeeCode{}
	for after := int64(0); ; {
		gs, err := s.cfg.Ledger.Groups(ctx, ledger.GroupFilter{Company: sc.Company, Period: sc.Period, Frozen: true, After: after, Limit: 500})
		if err != nil {
			s.fail(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		for _, g := range gs {
			for _, p := range g.Live {
				k := g.Key.Company + "\x00" + g.Key.Employee + "\x00" + g.Key.Code
				ec := by[k]
				if ec == nil {
					ec = &employeeCode{CompanyID: g.Key.Company, EmployeeID: g.Key.Employee, EmployeeName: g.EmployeeName, Code: g.Key.Code}
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
		}
		if len(gs) < 500 {
			break
		}
		after = gs[len(gs)-1].ID
	}
	// Its actions take the period of every source (of the company, when
	// one is named): a source's part of it is its import's.
	at := t
	at.Source = ""
	d := periodData{Scope: sc, Source: t.Source, Query: at.values().Encode(), Action: at.String(), Status: "open"}
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
	closed, err := s.cfg.Ledger.ClosedPeriods(ctx)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	for _, cp := range closed {
		if cp.Period.Overlaps(*sc.Period) {
			d.Status = "closed (" + cp.Period.String() + ")"
		}
	}
	s.render(w, r, http.StatusOK, "period", c, d)
}
