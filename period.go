package paysync

import (
	"fmt"
	"strings"
	"time"
)

// Period is a pay period: the days from First to Last, both included.
// Payroll pay parts carry no date, so paysync keeps the period an entry
// belongs to. Days are civil dates, with no time zone: each is held as a
// time.Time at UTC midnight.
//
// A Period is made only by ParsePeriod or PeriodOf and remembers how it
// is written (a month, an ISO week or a day range), so String gives
// that form back and == is true for the same days written the same way.
// The zero Period is no period: it contains no day.
type Period struct {
	first, last time.Time
	kind        PeriodKind
}

// PeriodKind is how a period is written. PAYSYNC_PERIOD=month (or week)
// derives each row's period from its date with PeriodOf.
type PeriodKind string

// The kinds of period.
const (
	PeriodMonth PeriodKind = "month" // 2026-11
	PeriodWeek  PeriodKind = "week"  // 2026-W45: an ISO 8601 week, Monday to Sunday
	PeriodRange PeriodKind = "range" // 2026-11-02..2026-11-15: the days given, both included
)

const periodForms = "write a month 2026-11, an ISO week 2026-W45 or a day range 2026-11-02..2026-11-15"

// ParsePeriod reads a period: a month (2026-11), an ISO 8601 week
// (2026-W45; week 1 is the one with the year's first Thursday, so it may
// start in December, and week 53 exists only in years that have it) or
// an inclusive day range (2026-11-02..2026-11-15, first ≤ last).
func ParsePeriod(s string) (Period, error) {
	p, err := parsePeriod(s)
	if err != nil {
		return Period{}, fmt.Errorf("period %q: %s (%s)", s, err, periodForms)
	}
	return p, nil
}

func parsePeriod(s string) (Period, error) {
	if a, b, ok := strings.Cut(s, ".."); ok {
		first, err := parseDay(a)
		if err != nil {
			return Period{}, err
		}
		last, err := parseDay(b)
		if err != nil {
			return Period{}, err
		}
		if last.Before(first) {
			return Period{}, fmt.Errorf("%s is after %s", a, b)
		}
		return Period{first: first, last: last, kind: PeriodRange}, nil
	}
	switch {
	case len(s) == 7 && digits(s[:4]) && s[4] == '-' && digits(s[5:]):
		y, m := atoi(s[:4]), atoi(s[5:])
		if err := checkYear(s[:4]); err != nil {
			return Period{}, err
		}
		if m < 1 || m > 12 {
			return Period{}, fmt.Errorf("month %s does not exist", s[5:])
		}
		return monthPeriod(y, time.Month(m)), nil
	case len(s) == 8 && digits(s[:4]) && s[4:6] == "-W" && digits(s[6:]):
		y, w := atoi(s[:4]), atoi(s[6:])
		if err := checkYear(s[:4]); err != nil {
			return Period{}, err
		}
		if w < 1 {
			return Period{}, fmt.Errorf("week %s does not exist", s[6:])
		}
		if n := isoWeeks(y); w > n {
			return Period{}, fmt.Errorf("%s has %d ISO weeks", s[:4], n)
		}
		// Week 1 is the week of 4 January.
		first := monday(time.Date(y, 1, 4, 0, 0, 0, 0, time.UTC)).AddDate(0, 0, 7*(w-1))
		return Period{first: first, last: first.AddDate(0, 0, 6), kind: PeriodWeek}, nil
	}
	return Period{}, fmt.Errorf("not a month, ISO week or day range")
}

// PeriodOf returns the month or ISO week that holds date (YYYY-MM-DD).
func PeriodOf(kind PeriodKind, date string) (Period, error) {
	if kind != PeriodMonth && kind != PeriodWeek {
		return Period{}, fmt.Errorf("period kind %q: want month or week", kind)
	}
	d, err := parseDay(date)
	if err != nil {
		return Period{}, fmt.Errorf("%s period: %w", kind, err)
	}
	if kind == PeriodMonth {
		return monthPeriod(d.Year(), d.Month()), nil
	}
	first := monday(d)
	return Period{first: first, last: first.AddDate(0, 0, 6), kind: PeriodWeek}, nil
}

// ParsePeriodKind reads the name of a kind a period can be derived by:
// month or week.
func ParsePeriodKind(s string) (PeriodKind, error) {
	if k := PeriodKind(s); k == PeriodMonth || k == PeriodWeek {
		return k, nil
	}
	return "", fmt.Errorf("period kind %q: want month or week", s)
}

// First returns the period's first day (UTC midnight).
func (p Period) First() time.Time { return p.first }

// Last returns the period's last day (UTC midnight), part of the period.
func (p Period) Last() time.Time { return p.last }

// Kind returns how the period is written.
func (p Period) Kind() PeriodKind { return p.kind }

// IsZero reports whether p is the zero Period.
func (p Period) IsZero() bool { return p.kind == "" }

// String returns the period as it is written: 2026-11, 2026-W45 or
// 2026-11-02..2026-11-15 ("" for the zero Period).
func (p Period) String() string {
	switch p.kind {
	case PeriodMonth:
		return p.first.Format("2006-01")
	case PeriodWeek:
		y, w := p.first.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, w)
	case PeriodRange:
		return p.first.Format(time.DateOnly) + ".." + p.last.Format(time.DateOnly)
	}
	return ""
}

// Contains reports whether date, an entry's YYYY-MM-DD date, is one of
// p's days. Anything else is in no period.
func (p Period) Contains(date string) bool {
	d, err := parseDay(date)
	return err == nil && !p.IsZero() && !d.Before(p.first) && !d.After(p.last)
}

// Overlaps reports whether p and q share a day.
func (p Period) Overlaps(q Period) bool {
	return !p.IsZero() && !q.IsZero() && !p.last.Before(q.first) && !q.last.Before(p.first)
}

// MarshalText writes the period as String does, for JSON and flags.
func (p Period) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads a period as ParsePeriod does.
func (p *Period) UnmarshalText(b []byte) error {
	v, err := ParsePeriod(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

func monthPeriod(y int, m time.Month) Period {
	first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	return Period{first: first, last: first.AddDate(0, 1, -1), kind: PeriodMonth}
}

// monday returns the Monday of d's ISO week.
func monday(d time.Time) time.Time {
	return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
}

// isoWeeks returns the number of ISO weeks of year y (52 or 53): 28
// December is always in the year's last week.
func isoWeeks(y int) int {
	_, w := time.Date(y, 12, 28, 0, 0, 0, 0, time.UTC).ISOWeek()
	return w
}

// parseDay reads a civil date written exactly YYYY-MM-DD, from year 0001.
func parseDay(s string) (time.Time, error) {
	if len(s) != 10 || !digits(s[:4]) || s[4] != '-' || !digits(s[5:7]) || s[7] != '-' || !digits(s[8:]) {
		return time.Time{}, fmt.Errorf("%q is not a date YYYY-MM-DD", s)
	}
	if err := checkYear(s[:4]); err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date: %w", s, err)
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date YYYY-MM-DD", s)
	}
	return d, nil
}

// checkYear refuses year 0000, which ISO weeks and the written forms
// cannot round-trip.
func checkYear(y string) error {
	if y == "0000" {
		return fmt.Errorf("year 0000 does not exist")
	}
	return nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// atoi reads a few ASCII digits (checked by digits).
func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}
