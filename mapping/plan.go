package mapping

import (
	"fmt"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// Planner collects mapped Lines into pay parts: aggregated per company ×
// employee × code × rate × rule within one import (when the rules say so),
// each pay part keeping the entries it came from.
//
// Memory grows with the number of entries (every pay part keeps its entry
// references and duplicate ids are detected); the streaming part of an
// import (reading, mapping, validating) does not.
type Planner struct {
	rules  *Rules
	wire   WireChecker
	groups map[groupKey]*group
	order  []*group
	seen   map[seenKey]paysync.EntryRef
	n      int
}

type seenKey struct{ id, rule string }

type groupKey struct {
	company, employee, code, rate, rule string
	seq                                 int // distinct per entry when not aggregating
}

type group struct {
	line  Line // the first line: company, employee, code, rate, sources
	hours paysync.Hours
	units decimal.NullDecimal
	amt   decimal.NullDecimal
	refs  []paysync.EntryRef
}

// NewPlanner returns a Planner under rules (nil: DefaultRules).
func NewPlanner(rules *Rules, wire WireChecker) *Planner {
	if rules == nil {
		rules = DefaultRules()
	}
	return &Planner{rules: rules, wire: wire, groups: map[groupKey]*group{}, seen: map[seenKey]paysync.EntryRef{}}
}

// Add adds a mapped, not skipped line. An entry id seen before in this
// import is a Problem.
func (p *Planner) Add(l Line) error {
	sk := seenKey{l.Ref.ID, l.Rule}
	if first, dup := p.seen[sk]; dup {
		return &Problem{Source: l.Ref.Source, Line: l.Ref.Line, EntryID: l.Ref.ID, Field: "id",
			Msg:  fmt.Sprintf("duplicate entry id (first at %s:%d)", first.Source, first.Line),
			Hint: "entry ids must be unique per source; fix the export"}
	}
	p.seen[sk] = l.Ref
	k := groupKey{company: l.CompanyID, employee: l.EmployeeID, code: l.Code, rule: l.Rule, rate: "-"}
	if l.Rate.Valid {
		k.rate = l.Rate.Decimal.String()
	}
	if !p.rules.Aggregate {
		p.n++
		k.seq = p.n
	}
	g := p.groups[k]
	if g == nil {
		g = &group{line: l}
		p.groups[k] = g
		p.order = append(p.order, g)
	}
	if l.UnitsFromHours {
		g.hours = g.hours.Add(l.Hours)
	}
	g.units = addNull(g.units, l.Units)
	g.amt = addNull(g.amt, l.Amount)
	g.refs = append(g.refs, l.Ref)
	return nil
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

// PayParts returns the planned pay parts in order of first appearance, and
// a Problem for each one whose values the wire cannot carry.
func (p *Planner) PayParts() ([]paysync.PlannedPayPart, []error) {
	out := make([]paysync.PlannedPayPart, 0, len(p.order))
	var probs []error
	for _, g := range p.order {
		l := g.line
		pp := paysync.PlannedPayPart{
			CompanyID:    l.CompanyID,
			PayPartInput: paysync.PayPartInput{EmployeeID: l.EmployeeID, Code: l.Code},
			EmployeeName: l.EmployeeName,
			Description:  l.Description,
			Rule:         l.Rule,
			Entries:      g.refs,
		}
		pp.Units = g.units
		if l.UnitsFromHours {
			pp.Units = decimal.NewNullDecimal(g.hours.Round(p.rules.Places, p.rules.Rounding))
		}
		pp.Rate = l.Rate
		pp.Amount = g.amt
		first := g.refs[0]
		prob := func(field, msg, hint string) *Problem {
			if len(g.refs) > 1 {
				msg += fmt.Sprintf(" (pay part of %d entries)", len(g.refs))
			}
			return &Problem{Source: first.Source, Line: first.Line, EntryID: first.ID, Field: field, Msg: msg, Hint: hint}
		}
		if s := l.AmountProduct; s != nil {
			a, b := p.operand(s.Operands[0], pp, g), p.operand(s.Operands[1], pp, g)
			if !a.Valid || !b.Valid {
				probs = append(probs, prob("amount", fmt.Sprintf("amount = %s, but a factor is missing", s), "give the rule the rate (or units) the product uses"))
				continue
			}
			pp.Amount = decimal.NewNullDecimal(p.rules.Rounding.Round(a.Decimal.Mul(b.Decimal), p.rules.Places))
		}
		bad := false
		if p.wire != nil {
			for _, f := range paysync.Fields {
				if v := pp.Get(f); v.Valid {
					if err := p.wire.CheckWire(f, v.Decimal); err != nil {
						probs = append(probs, prob(string(f), err.Error(), "round it in the source, or set rounding.places in the rules file"))
						bad = true
					}
				}
			}
		}
		if !bad {
			out = append(out, pp)
		}
	}
	return out, probs
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
