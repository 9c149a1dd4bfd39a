package stream

import (
	"strings"
	"unicode"
)

// DefaultPrefix is the first token(s) of the subjects Subject builds.
const DefaultPrefix = "timesheets"

// Subject returns prefix.companyID.source, the subject an entry of that
// company from that source is published on ("timesheets.MV8x.toggl").
// Characters a subject token cannot hold (whitespace, '.', '*', '>') become
// '_'; an empty company or source becomes "default", an empty prefix
// DefaultPrefix. The prefix may have several tokens ("acme.timesheets").
func Subject(prefix, companyID, source string) string {
	var tokens []string
	for _, t := range strings.Split(prefix, ".") {
		if t = sanitizeToken(t); t != "" {
			tokens = append(tokens, t)
		}
	}
	if len(tokens) == 0 {
		tokens = []string{DefaultPrefix}
	}
	for _, t := range []string{companyID, source} {
		if t = sanitizeToken(t); t == "" {
			t = "default"
		}
		tokens = append(tokens, t)
	}
	return strings.Join(tokens, ".")
}

// CompanyOf returns the company of an entry subject built by Subject: the
// token before the last ("timesheets.MV8x.toggl" → "MV8x"). It returns ""
// for a subject with fewer than three tokens or the company "default"
// (Subject's stand-in for none): the entry then names its company itself.
func CompanyOf(subject string) string {
	tokens := strings.Split(subject, ".")
	if len(tokens) < 3 {
		return ""
	}
	if c := tokens[len(tokens)-2]; c != "default" {
		return c
	}
	return ""
}

// SourceOf returns the source of an entry subject built by Subject: its
// last token ("timesheets.MV8x.toggl" → "toggl"), "" for a subject with
// fewer than three tokens.
func SourceOf(subject string) string {
	tokens := strings.Split(subject, ".")
	if len(tokens) < 3 {
		return ""
	}
	return tokens[len(tokens)-1]
}

// FilterTakesCompany reports whether the consumer filter matches some
// entry subject <prefix>.<company>.<source>: the company is the second
// token ('*' is one token, '>' the rest). The prefix is not checked (the
// stream's subjects decide it); an empty filter takes every company.
func FilterTakesCompany(filter, company string) bool {
	filter = strings.TrimSpace(filter)
	if filter == "" {
		return true
	}
	tokens := strings.Split(filter, ".")
	for i, t := range tokens {
		switch {
		case t == ">":
			return true // the rest, whatever it is
		case i >= 3:
			return false // longer than any entry subject
		case i == 1 && t != "*" && t != company:
			return false
		}
	}
	return len(tokens) == 3
}

func sanitizeToken(s string) string {
	s = strings.TrimSpace(s)
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return '_'
		}
		return r
	}, s)
}

// validName reports whether s can name a stream or a consumer.
func validName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return r == '.' || r == '*' || r == '>' || r == '/' || r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r)
	})
}

// validSubject reports whether s is a well-formed subject; wildcards '*'
// and a final '>' are allowed only when wildcards is set.
func validSubject(s string, wildcards bool) bool {
	if s == "" {
		return false
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return false
		case strings.ContainsFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
			return false
		case t == "*":
			if !wildcards {
				return false
			}
		case t == ">":
			if !wildcards || i != len(tokens)-1 {
				return false
			}
		case strings.ContainsAny(t, "*>"):
			return false
		}
	}
	return true
}

// covers reports whether every subject that f matches is matched by the
// pattern p. For a literal f, that is whether p matches f.
func covers(p, f string) bool {
	pt, ft := strings.Split(p, "."), strings.Split(f, ".")
	for i, t := range pt {
		if t == ">" {
			return len(ft) > i
		}
		if i >= len(ft) {
			return false
		}
		switch {
		case t == "*":
			if ft[i] == ">" {
				return false
			}
		case t != ft[i]:
			return false
		}
	}
	return len(pt) == len(ft)
}

func coveredByAny(patterns []string, f string) bool {
	for _, p := range patterns {
		if covers(p, f) {
			return true
		}
	}
	return false
}
