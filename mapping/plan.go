package mapping

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// Planner collects mapped Lines into pay parts: aggregated per company ×
// employee × code × rate × rule × pay period (Rules.Period) within one
// import (when the rules say so).
// Lines go in with Place, complete pay parts come out with Take. It keeps
// only what each pay part sums (bounded by the distinct company × employee
// × code × rate × rule, or by nothing at all without aggregation), so
// imports of any size plan in flat memory: the caller records which pay
// part each line went into, and dedupes entries (intake does both).
type Planner struct {
	rules  *Rules
	wire   WireChecker
	groups map[groupKey]*group
	order  []*group // aggregating: every group; without aggregation: those not yet taken
	n      int
}

type groupKey struct {
	company, employee, code, rate, rule string
	period                              string // the entry's pay period (Rules.Period)
	seq                                 int    // distinct per entry when not aggregating
}

type group struct {
	index int  // in order of first appearance, from 0
	line  Line // the first line: company, employee, code, rate, sources
	hours paysync.Hours
	units decimal.NullDecimal
	amt   decimal.NullDecimal
	first paysync.EntryRef
	n     int // lines summed
}

// NewPlanner returns a Planner under rules (nil: DefaultRules).
func NewPlanner(rules *Rules, wire WireChecker) *Planner {
	if rules == nil {
		rules = DefaultRules()
	}
	return &Planner{rules: rules, wire: wire, groups: map[groupKey]*group{}}
}

// Place adds a mapped, not skipped line and returns the index of the pay
// part it went into: pay parts are numbered from 0 in order of first
// appearance.
func (p *Planner) Place(l Line) int {
	k := groupKey{company: l.CompanyID, employee: l.EmployeeID, code: l.Code, rule: l.Rule, rate: "-", period: p.period(l.Date)}
	if l.Rate.Valid {
		k.rate = l.Rate.Decimal.String()
	}
	var g *group
	if !p.rules.Aggregate {
		k.seq = p.n
	} else {
		g = p.groups[k]
	}
	if g == nil {
		g = &group{index: p.n, line: l, first: l.Ref}
		p.n++
		if p.rules.Aggregate {
			p.groups[k] = g
		}
		p.order = append(p.order, g)
	}
	if l.UnitsFromHours {
		g.hours = g.hours.Add(l.Hours)
	}
	g.units = addNull(g.units, l.Units)
	g.amt = addNull(g.amt, l.Amount)
	g.n++
	return g.index
}

func addNull(a, b decimal.NullDecimal) decimal.NullDecimal {
	switch {
	case !b.Valid:
		return a
	case !a.Valid:
		return b
	}
	return decimal.NewNullDecimal(a.Decimal.Add(b.Decimal))
}

// period is the pay period of a line's date under the rules ("" when the
// date is not one: the mapper has said so).
func (p *Planner) period(date string) string {
	kind := cmp.Or(p.rules.Period, paysync.PeriodMonth)
	if kind == paysync.PeriodMonth && len(date) == len("2006-01-02") && date[4] == '-' && date[7] == '-' {
		return date[:7] // the month as ParsePeriod writes it, without the parse (once per entry)
	}
	pp, err := paysync.PeriodOf(kind, date)
	if err != nil {
		return ""
	}
	return pp.String()
}

// Placed is a complete pay part (Take).
type Placed struct {
	Index   int                    // the index Place returned for its lines
	PayPart paysync.PlannedPayPart // without Entries
	Entries int                    // the number of lines it sums
	// Problems say why the pay part cannot be sent (a value the wire
	// cannot carry, a missing factor): it is then left out.
	Problems []error
}

// Take returns the pay parts that are complete, each once, in order of
// first appearance. Without aggregation every pay part is complete as soon
// as its line is placed; with it, only at the end: final.
func (p *Planner) Take(final bool) []Placed {
	if p.rules.Aggregate && !final {
		return nil
	}
	out := make([]Placed, len(p.order))
	for i, g := range p.order {
		pp, probs := p.finish(g)
		out[i] = Placed{Index: g.index, PayPart: pp, Entries: g.n, Problems: probs}
	}
	if !p.rules.Aggregate {
		clear(p.order)
		p.order = p.order[:0]
	} else {
		p.order = nil
	}
	return out
}

// finish computes g's pay part, or the problems that keep it from being
// sent.
func (p *Planner) finish(g *group) (paysync.PlannedPayPart, []error) {
	l := g.line
	pp := paysync.PlannedPayPart{
		CompanyID:    l.CompanyID,
		PayPartInput: paysync.PayPartInput{EmployeeID: l.EmployeeID, Code: l.Code},
		EmployeeName: l.EmployeeName,
		Description:  l.Description,
		Rule:         l.Rule,
	}
	pp.Units = g.units
	if l.UnitsFromHours {
		pp.Units = decimal.NewNullDecimal(g.hours.Round(p.rules.Places, p.rules.Rounding))
	}
	pp.Rate = l.Rate
	pp.Amount = g.amt
	first := g.first
	prob := func(field, msg, hint string) *Problem {
		if g.n > 1 {
			msg += fmt.Sprintf(" (pay part of %d entries)", g.n)
		}
		return &Problem{Source: first.Source, Line: first.Line, EntryID: first.ID, Field: field, Msg: msg, Hint: hint}
	}
	if s := l.AmountProduct; s != nil {
		a, b := p.operand(s.Operands[0], pp, g), p.operand(s.Operands[1], pp, g)
		if !a.Valid || !b.Valid {
			return pp, []error{prob("amount", fmt.Sprintf("amount = %s, but a factor is missing", s), "give the rule the rate (or units) the product uses")}
		}
		pp.Amount = decimal.NewNullDecimal(p.rules.Rounding.Round(a.Decimal.Mul(b.Decimal), p.rules.Places))
	}
	var probs []error
	if p.wire != nil {
		for _, f := range paysync.Fields {
			if v := pp.Get(f); v.Valid {
				if err := p.wire.CheckWire(f, v.Decimal); err != nil {
					probs = append(probs, prob(string(f), err.Error(), "round it in the source, or set rounding.places in the rules file"))
				}
			}
		}
	}
	return pp, probs
}

func (p *Planner) operand(s *Source, pp paysync.PlannedPayPart, g *group) decimal.NullDecimal {
	switch s.Kind {
	case FromHours:
		if !g.hours.Valid {
			return decimal.NullDecimal{}
		}
		return decimal.NewNullDecimal(g.hours.Round(p.rules.Places, p.rules.Rounding))
	case FromUnits:
		return pp.Units
	case FromRate:
		return pp.Rate
	case FromConst:
		return decimal.NewNullDecimal(s.Const)
	}
	return decimal.NullDecimal{}
}

// GroupTotals is what a group of lines sums (company × employee × code ×
// rate × period, and the amount product its lines share), as the ledger
// keeps it: the exact sums of the lines that count.
type GroupTotals struct {
	CompanyID, EmployeeID, EmployeeName, Code, Description string
	Product                                                string // the lines' amount product (Line.Shape), "" for none
	Rate                                                   decimal.NullDecimal
	Seconds, Units, Amount                                 decimal.NullDecimal
	Lines                                                  int
}

// Shape is what lines of one group must share beyond their key: the
// amount computed on the group's totals (a product such as "hours × rate"),
// "" for none. Units from hours and explicit units add up in one group.
func (l Line) Shape() string {
	if l.AmountProduct == nil {
		return ""
	}
	return l.AmountProduct.String()
}

// Finish computes the pay part a group's totals make, rounded once (hours
// from exact seconds, plus explicit units; an amount product on the
// totals), or the problems that keep it from being sent: the same finish a
// planner gives.
func Finish(rules *Rules, wire WireChecker, t GroupTotals) (paysync.PlannedPayPart, []error) {
	p := NewPlanner(rules, wire)
	l := Line{CompanyID: t.CompanyID, EmployeeID: t.EmployeeID, EmployeeName: t.EmployeeName, Code: t.Code,
		Description: t.Description, UnitsFromHours: t.Seconds.Valid, Rate: t.Rate}
	if t.Product != "" {
		prod, err := parseProduct(t.Product)
		if err != nil {
			return paysync.PlannedPayPart{}, []error{err}
		}
		l.AmountProduct = prod
	}
	hours := paysync.Hours{Seconds: t.Seconds.Decimal, Valid: t.Seconds.Valid}
	units := t.Units
	if t.Seconds.Valid && t.Units.Valid {
		// Lines from hours and lines with units of their own: the hours
		// are rounded once, the units added exactly.
		pp, probs := p.finish(&group{line: l, hours: hours, amt: t.Amount, n: t.Lines})
		if len(probs) > 0 || !pp.Units.Valid {
			return pp, probs
		}
		l.UnitsFromHours = false
		units = decimal.NewNullDecimal(pp.Units.Decimal.Add(t.Units.Decimal))
		hours = paysync.Hours{}
	}
	return p.finish(&group{line: l, hours: hours, units: units, amt: t.Amount, n: t.Lines})
}

// parseProduct reads back a product's String(): "A × B", each of hours,
// units, rate or a decimal constant.
func parseProduct(s string) (*Source, error) {
	a, b, ok := strings.Cut(s, " × ")
	if !ok {
		return nil, fmt.Errorf("amount product %q cannot be read", s)
	}
	op := func(x string) (*Source, error) {
		switch x {
		case "hours":
			return &Source{Kind: FromHours}, nil
		case "units":
			return &Source{Kind: FromUnits}, nil
		case "rate":
			return &Source{Kind: FromRate}, nil
		}
		d, err := decimal.NewFromString(x)
		if err != nil {
			return nil, fmt.Errorf("amount product %q: operand %q cannot be read", s, x)
		}
		return &Source{Kind: FromConst, Const: d}, nil
	}
	x, err := op(a)
	if err != nil {
		return nil, err
	}
	y, err := op(b)
	if err != nil {
		return nil, err
	}
	return &Source{Kind: FromProduct, Operands: [2]*Source{x, y}}, nil
}

// PeriodOf is the pay period a line's date falls in under the rules.
func (r *Rules) PeriodOf(date string) (paysync.Period, error) {
	return paysync.PeriodOf(cmp.Or(r.Period, paysync.PeriodMonth), date)
}
