package mapping

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/paysync/paysync"
	"github.com/shopspring/decimal"
)

// WireChecker says whether a value can be sent to the payroll API exactly.
// payroll.Schema satisfies it.
type WireChecker interface {
	CheckWire(f paysync.Field, d decimal.Decimal) error
}

// Mapper turns entries into pay part contributions (Lines), validating
// each against the payroll system's codes and employees.
type Mapper struct {
	rules   *Rules
	cache   *Cache
	wire    WireChecker
	company string
}

// NewMapper returns a Mapper. rules nil means DefaultRules; wire nil skips
// the wire precision check; defaultCompany is used when neither the entry
// nor the rules name a company.
func NewMapper(rules *Rules, cache *Cache, wire WireChecker, defaultCompany string) *Mapper {
	if rules == nil {
		rules = DefaultRules()
	}
	return &Mapper{rules: rules, cache: cache, wire: wire, company: defaultCompany}
}

// Rules returns the mapper's rules.
func (m *Mapper) Rules() *Rules { return m.rules }

// Line is one entry's contribution to a pay part.
type Line struct {
	Skip string // why the entry is not paid ("" = it is)

	CompanyID    string
	EmployeeID   string
	EmployeeName string
	Code         string
	Description  string
	Rule         string // rule name ("entry code" for entries that carry their code)

	UnitsFromHours bool
	Hours          paysync.Hours       // the entry's hours, when units come from hours
	Units          decimal.NullDecimal // units from a constant or field
	Rate           decimal.NullDecimal
	Amount         decimal.NullDecimal // amount from a constant or field
	AmountProduct  *Source             // amount computed on the final pay part

	Ref paysync.EntryRef
	// Date is the entry's date: pay parts sum entries of one pay period.
	Date string
}

// implicitRule serves entries that carry their own code.
var implicitRule = Rule{Name: "entry code"}

// Company is the company an entry without company_id goes to.
func (m *Mapper) Company() string { return firstNonEmpty(m.rules.Company, m.company) }

// Map maps one entry to its lines: usually one; several when rules with
// continue: true also match (hours and a supplement). It returns a
// *Problem (or several, joined) when the entry cannot be paid as it
// stands, and one Line with Skip set when the entry is not to be paid
// (unapproved, zero hours, ignored person).
func (m *Mapper) Map(ctx context.Context, e paysync.Entry) ([]Line, error) {
	prob := func(field, msg, hint string) *Problem {
		return &Problem{Source: e.Source, Line: e.Line, EntryID: e.ID, Field: field, Msg: msg, Hint: hint}
	}
	if m.ignored(e) {
		return []Line{{Ref: e.Ref(), Skip: "ignored person"}}, nil
	}
	if m.rules.Skip.Unapproved && e.Approved != nil && !*e.Approved {
		return []Line{{Ref: e.Ref(), Skip: "unapproved"}}, nil
	}
	if v, bad := unreadYesNo(e.Approved, e, "approved"); bad && m.rules.Skip.Unapproved {
		return nil, prob("approved", fmt.Sprintf("%q is not yes or no", v),
			fmt.Sprintf("skip.unapproved skips entries that are not approved, so it needs approved: write yes or no (ja/nej, true/false, ...), or set skip: {unapproved: false} in %s", m.rulesSource()))
	}
	rules, err := m.rulesFor(e, prob)
	if err != nil {
		return nil, err
	}
	lines := make([]Line, 0, len(rules))
	var probs []error
	for _, r := range rules {
		l, err := m.mapRule(ctx, e, r, prob)
		if err != nil {
			probs = append(probs, err)
			continue
		}
		if l.Skip != "" && len(rules) > 1 {
			continue // a zero-hour supplement next to the main line
		}
		lines = append(lines, l)
	}
	if len(probs) > 0 {
		return nil, errors.Join(probs...)
	}
	return lines, nil
}

// mapRule maps e under one rule.
func (m *Mapper) mapRule(ctx context.Context, e paysync.Entry, rule *Rule, prob func(string, string, string) *Problem) (Line, error) {
	l := Line{Ref: e.Ref(), Date: e.Date, Rule: rule.Name, Code: rule.Code}
	if rule == &implicitRule {
		l.Code = e.Code
	}
	where := ""
	if rule.Line > 0 {
		where = fmt.Sprintf(" (rule %q, %s:%d)", rule.Name, m.rules.Source, rule.Line)
	}
	var probs []error
	eval := func(f paysync.Field, s *Source) decimal.NullDecimal {
		if s == nil {
			return decimal.NullDecimal{}
		}
		switch s.Kind {
		case FromHours:
			if !e.Hours.Valid {
				probs = append(probs, prob("hours", fmt.Sprintf("%s comes from hours, but the entry has none%s", f, where), "give the entry hours, or change the rule"))
				return decimal.NullDecimal{}
			}
			if f == paysync.FieldUnits {
				l.UnitsFromHours, l.Hours = true, e.Hours
				return decimal.NullDecimal{}
			}
			// Hours as a rate or amount: round now (rare, but exact rules apply).
			return decimal.NewNullDecimal(e.Hours.Round(m.rules.Places, m.rules.Rounding))
		case FromConst:
			return decimal.NewNullDecimal(s.Const)
		case FromField:
			v, ok, err := entryField(e, s.Field)
			if err != nil {
				probs = append(probs, prob(s.Field, err.Error(), "fix the value in the source"))
			} else if !ok {
				probs = append(probs, prob(s.Field, fmt.Sprintf("%s comes from field %q, which the entry lacks%s", f, s.Field, where), "add the field to the entry, or change the rule"))
			}
			return v
		case FromProduct:
			l.AmountProduct = s
		}
		return decimal.NullDecimal{}
	}
	if rule == &implicitRule {
		l.Units, l.Rate, l.Amount = e.Units, e.Rate, e.Amount
		if !e.Units.Valid && e.Hours.Valid {
			l.UnitsFromHours, l.Hours = true, e.Hours
		}
	} else {
		l.Units = eval(paysync.FieldUnits, rule.Units)
		l.Rate = eval(paysync.FieldRate, rule.Rate)
		l.Amount = eval(paysync.FieldAmount, rule.Amount)
	}
	if len(probs) > 0 {
		return l, errors.Join(probs...)
	}
	if m.rules.Skip.ZeroHours && l.UnitsFromHours && l.Hours.NoTime() && !l.Amount.Valid && l.AmountProduct == nil {
		l.Skip = "zero hours"
		return l, nil
	}

	// The company and the employee.
	l.CompanyID = firstNonEmpty(e.CompanyID, m.rules.Company, m.company)
	if l.CompanyID == "" {
		return l, prob("company_id", "no company for this entry", "set company_id on the entry, company: in the rules file, or PAYSYNC_COMPANY_ID")
	}
	if err := m.employee(ctx, e, &l, prob); err != nil {
		return l, err
	}

	// Against the pay code's rules.
	meta, err := m.cache.Meta(ctx)
	if err != nil {
		return l, fmt.Errorf("fetch pay codes: %w", err)
	}
	md, ok := meta[l.Code]
	if !ok && m.cache.refreshMeta() {
		// A stale table is no verdict on the entry: read it again.
		if meta, err = m.cache.Meta(ctx); err != nil {
			return l, fmt.Errorf("fetch pay codes: %w", err)
		}
		md, ok = meta[l.Code]
	}
	if !ok {
		hint := "fix the code in the entry"
		if rule != &implicitRule {
			hint = fmt.Sprintf("fix the code of rule %q in %s:%d", rule.Name, m.rules.Source, rule.Line)
		}
		return l, prob("code", fmt.Sprintf("unknown pay code %q; known codes: %s", l.Code, strings.Join(m.cache.Codes(), ", ")), hint+"; paysync meta lists the codes")
	}
	l.Description = md.Description
	for _, f := range paysync.Fields {
		present := l.present(f)
		switch r := md.Rule(f); {
		case r == paysync.RuleMandatory && !present:
			probs = append(probs, prob(string(f), fmt.Sprintf("code %s needs %s, and none is given%s", l.Code, f, where), fmt.Sprintf("give %s in the rule or the entry", f)))
		case r == paysync.RuleForbidden && present:
			probs = append(probs, prob(string(f), fmt.Sprintf("code %s does not take %s%s", l.Code, f, where), fmt.Sprintf("remove %s from the rule or the entry", f)))
		}
	}
	if len(probs) > 0 {
		return l, errors.Join(probs...)
	}
	if m.wire != nil && l.Rate.Valid {
		if err := m.wire.CheckWire(paysync.FieldRate, l.Rate.Decimal); err != nil {
			return l, prob("rate", err.Error(), "round the rate in the source or the rule")
		}
	}
	return l, nil
}

func (l *Line) present(f paysync.Field) bool {
	switch f {
	case paysync.FieldUnits:
		return l.UnitsFromHours || l.Units.Valid
	case paysync.FieldRate:
		return l.Rate.Valid
	case paysync.FieldAmount:
		return l.Amount.Valid || l.AmountProduct != nil
	}
	return false
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func (m *Mapper) ignored(e paysync.Entry) bool {
	ig := m.rules.Employees.Ignore
	if len(ig) == 0 {
		return false
	}
	for _, k := range []string{e.EmployeeID, e.Email, e.Name, e.EmployeeNumber} {
		if k != "" && ig[fold(k)] {
			return true
		}
	}
	return false
}

// rulesFor picks the entry's rules: its own code; else every matching rule
// up to the first one without continue; the default rule when no rule
// without continue matched.
func (m *Mapper) rulesFor(e paysync.Entry, prob func(string, string, string) *Problem) ([]*Rule, error) {
	if e.Code != "" {
		return []*Rule{&implicitRule}, nil
	}
	var def *Rule
	var out []*Rule
	for i := range m.rules.Rules {
		r := &m.rules.Rules[i]
		if r.Default {
			def = r
			continue
		}
		if r.Match.matches(e) {
			out = append(out, r)
			if !r.Continue {
				return out, nil
			}
		} else if p := m.unreadMatch(e, r, prob); p != nil {
			return nil, p
		}
	}
	if def != nil {
		return append(out, def), nil
	}
	if len(out) > 0 {
		return out, nil
	}
	if len(m.rules.Rules) == 0 {
		return nil, prob("code", fmt.Sprintf("entry has no code (type %q) and there are no rules", e.Type), "give the entry a code, or a rules file (PAYSYNC_MAPPING) that maps its type")
	}
	return nil, prob("type", fmt.Sprintf("no rule matches type %q, project %q, tags %q", e.Type, e.Project, strings.Join(e.Tags, ",")), fmt.Sprintf("add a rule for it, or a default rule, in %s", m.rules.Source))
}

// unreadYesNo reports a billable or approved the reader could not read
// as yes or no: it kept the text in Fields[key] (see yesNo).
func unreadYesNo(b *bool, e paysync.Entry, key string) (string, bool) {
	if b != nil {
		return "", false
	}
	v := e.Fields[key]
	if v == "" {
		return "", false
	}
	_, ok := parseYesNo(v)
	return v, !ok
}

// unreadMatch is the problem of a rule that did not match only because it
// matches on billable or approved and the entry's value is unreadable: the
// rule needs the value, so the entry cannot be mapped. Rules that do not
// use the field never see it.
func (m *Mapper) unreadMatch(e paysync.Entry, r *Rule, prob func(string, string, string) *Problem) *Problem {
	mt := r.Match
	field, v := "", ""
	if b, bad := unreadYesNo(e.Billable, e, "billable"); bad && mt.Billable != nil {
		field, v, mt.Billable = "billable", b, nil
	}
	if b, bad := unreadYesNo(e.Approved, e, "approved"); bad && mt.Approved != nil {
		if field == "" {
			field, v = "approved", b
		}
		mt.Approved = nil
	}
	if field == "" || !mt.matches(e) {
		return nil
	}
	where := m.rulesSource()
	if r.Line > 0 {
		where = fmt.Sprintf("%s:%d", where, r.Line)
	}
	return prob(field, fmt.Sprintf("%q is not yes or no", v),
		fmt.Sprintf("rule %q matches on %s (%s): write yes or no (ja/nej, true/false, ...), or take %s out of the rule's match", r.Name, field, where, field))
}

// rulesSource names the rules file, for hints.
func (m *Mapper) rulesSource() string {
	if m.rules.Source != "" {
		return m.rules.Source
	}
	return "the rules file"
}

func (mt Match) matches(e paysync.Entry) bool {
	if len(mt.Type) > 0 && !anyFold(mt.Type, e.Type) {
		return false
	}
	if len(mt.Project) > 0 && !anyFold(mt.Project, e.Project) {
		return false
	}
	if len(mt.Tags) > 0 {
		found := false
		for _, t := range e.Tags {
			if anyFold(mt.Tags, t) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if mt.Billable != nil && (e.Billable == nil || *e.Billable != *mt.Billable) {
		return false
	}
	if mt.Approved != nil && (e.Approved == nil || *e.Approved != *mt.Approved) {
		return false
	}
	return true
}

func anyFold(list []string, v string) bool {
	for _, s := range list {
		if strings.EqualFold(strings.TrimSpace(s), strings.TrimSpace(v)) {
			return true
		}
	}
	return false
}

// entryField reads a numeric entry field: units, rate, amount, hours, or
// an extra column.
func entryField(e paysync.Entry, name string) (decimal.NullDecimal, bool, error) {
	switch strings.ToLower(name) {
	case "units":
		return e.Units, e.Units.Valid, nil
	case "rate":
		return e.Rate, e.Rate.Valid, nil
	case "amount":
		return e.Amount, e.Amount.Valid, nil
	}
	raw, ok := e.Fields[name]
	if !ok {
		for k, v := range e.Fields {
			if strings.EqualFold(k, name) {
				raw, ok = v, true
				break
			}
		}
	}
	if !ok || strings.TrimSpace(raw) == "" {
		return decimal.NullDecimal{}, false, nil
	}
	comma := strings.Contains(raw, ",") && !strings.Contains(raw, ".")
	d, err := paysync.ParseDecimal(raw, comma)
	if err != nil {
		return decimal.NullDecimal{}, false, fmt.Errorf("field %s: %v", name, err)
	}
	return decimal.NewNullDecimal(d), true, nil
}

// employee resolves the entry's person in its company. A miss fetches the
// company's employees again when the cached list is older than 30 s.
func (m *Mapper) employee(ctx context.Context, e paysync.Entry, l *Line, prob func(string, string, string) *Problem) error {
	err := m.resolve(ctx, e, l, prob)
	var p *Problem
	if errors.As(err, &p) && p.Field != "company_id" && m.cache.refresh(l.CompanyID) {
		return m.resolve(ctx, e, l, prob)
	}
	return err
}
